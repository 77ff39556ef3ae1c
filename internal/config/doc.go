// Package config reads and checks mcpbox.yaml. Policy is plain data:
// [Parse] turns bytes into a [Config] of plain structs, [Validate] runs a
// list of semantic checks over it, [Load] does both, and [Config.Marshal]
// prints a config back. The package does no I/O beyond the bytes it is
// given: the CLI reads the file; internal/specconv turns its paths into
// host paths.
//
// # Errors
//
// Every problem is an [*Error] located as FILE:LINE:COL (1-based, from the
// YAML node); Parse and Validate collect all of them into an [Errors],
// sorted by position. YAML syntax errors carry only a line, because the
// YAML library reports no column; their column is 1. Structural rules:
// unknown keys (with a "did you mean" for a known key within edit distance
// 2), duplicate keys, values of the wrong type, an empty file and a
// top-level value that is not a mapping are all errors, as are aliases
// (*name) and merge keys (<<), which would let a small file expand
// exponentially and which the schema does not need. A null value is an
// empty mapping where a mapping is expected ("output:" means "output: {}"),
// but an error where a list is expected, so that a blank "require:" cannot
// silently mean "require nothing".
//
// # Values
//
// Sizes ([Size]) are integers with an optional unit Ki, Mi, Gi, Ti, Pi, Ei
// or k, M, G, T, P, E. Durations ([Duration]) use time.ParseDuration syntax
// and may not be negative. A key written with a zero or empty value where
// that would read as "not set" (pids: 0, call_timeout: 0s, state_dir: "")
// is an error, since it cannot mean what was intended.
//
// Paths are kept as written. Host paths (state_dir, filesystem sources,
// template, audit.jsonl, tls files) may be relative or start with "~"; the
// CLI resolves relative paths against the config file's directory and
// expands "~" later. Paths inside the sandbox (mount targets, exec.allow)
// must be absolute and clean.
//
// Mount targets may not be "/", may not lie under the kernel filesystems
// /proc, /dev or /sys, and may be neither at, under nor above a path the
// sandbox provides itself: /workspace/input, /workspace/output, /tmp,
// /run/secrets, /usr, /etc, /bin, /sbin, /lib, /lib32, /lib64, /libx32.
// So /data and /workspace/cache are fine; /workspace, /run and /usr/local
// are not.
//
// Secrets and client tokens are references (env:VAR, file:PATH,
// cmd:COMMAND, and for a secret of a server on the kubernetes backend
// without inject, kubernetes:SECRET/KEY), never literal values; errors
// about them do not repeat the offending text, which may be a pasted
// secret.
//
// # Isolation layers
//
// sandbox.require may appear at the top level and in each server. A
// server's list, when present, replaces the top-level one (lists are not
// merged). Absent everywhere, every layer is required: the sandbox fails
// closed. A present list, even an empty one, requires exactly the layers it
// names and accepts that the others are missing on this host. See
// [Config.RequiredLayers].
//
// # Positions
//
// Each struct keeps a [Meta] with the position of its mapping and of each
// key's value, so Validate can report FILE:LINE:COL for a config that came
// from a file and plain messages for one built in code. Compare configs
// with Meta and [Pos] ignored.
package config
