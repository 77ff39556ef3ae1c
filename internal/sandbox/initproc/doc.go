// Package initproc is the sandbox's init: pid 1 of each sandbox, started
// by package sandbox (the host side) with the hidden argument Arg. It
// reads its config from the host, builds the read-only root, brings up
// loopback and the egress listeners, puts up the workload's walls on a
// thread of its own and forks the workload (or holds it, forked ahead, for
// a warm sandbox), then reaps until the workload exits.
//
// It is a package of its own so that the lean init binary
// (cmd/mcpbox-init) links only what the init runs: x/sys, x/net/bpf,
// internal/landlock, internal/egress/handover and small standard
// packages. Go runs the initialisers of every linked package at each
// start, and the host side's (the egress proxy's net/http and TLS,
// cgroups, build info) cost a cold start more than the init's own work
// in user space (issue 19). internal/conventions keeps them out
// (TestLeanInitDependencies).
//
// The types the host sends (Config, Workload, ...) are the init's own,
// exported under aliases; package sandbox names them by its older
// unexported names (internal/sandbox/initproc.go).
package initproc
