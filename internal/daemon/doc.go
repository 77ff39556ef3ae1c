// Package daemon is `mcpbox serve` as a library: given a loaded config and
// the choices of the command line, Run finds the state dir, removes what
// crashed gateways left, starts this instance's admin socket, the guard
// (the call pipeline and its audit store), the servers' launchers, the
// gateway, the approvals web endpoint and the transports (stdio, HTTP
// with its bearer token and TLS), and takes them down in order when the
// context ends or a signal arrives. RunServer does the same for one
// sandboxed server over stdio (`mcpbox run`), and Lister starts servers
// to list their definitions (`mcpbox pin`).
//
// It decides how to serve, never how to say it: what a person must see
// (the startup summary, the URL and token, the cgroups advice) reaches
// the command line as data through the callbacks of Options or as typed
// errors (ConfigError, CgroupsError), which the CLI formats and turns
// into exit codes. It parses no flags and writes to standard output only
// the MCP stream it is given.
//
// Layers: daemon (layer 4) wires guard and launch (3), admin and specconv
// (2) and the mechanisms below them; only internal/cli imports it.
package daemon
