// Package builtin is mcpbox's built-in workspace MCP server: file tools
// over /workspace/input (read-only, or writable when it is an overlay:
// Options.InputWritable) and /workspace/output (read-write), and
// policy-checked commands and background jobs. An output dir inside the
// input is not shown under input/ (Options.InputHidden).
//
// It runs inside an mcpbox sandbox, which supplies the isolation (Landlock,
// namespaces, no network). This package still treats tool arguments and
// workspace files as hostile: every path is resolved beneath its root with
// the semantics of openat2's RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS and
// RESOLVE_NO_XDEV, special files are refused, writes never follow a final
// symlink, and errors name workspace paths only. The kernel's openat2 is
// used where it is allowed; inside the sandbox, whose seccomp filter
// answers openat2 with ENOSYS, an equivalent userspace resolver takes over
// (beneath_linux.go, fuzzed against the kernel's).
//
// Paths seen by clients are workspace-relative: "input/src/main.go" or
// "output/report.md"; the absolute forms "/workspace/input/..." and
// "/workspace/output/..." are accepted as well.
package builtin
