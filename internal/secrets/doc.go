// Package secrets resolves secret references — env:VAR (mcpbox's own
// environment), file:PATH, cmd:PROGRAM ARGS — to values. Values live in
// memory only: this package never writes them anywhere, never puts them in
// a command line, and its errors never contain them. Which server gets
// which secret is the config's business (a secret is declared under one
// server); the sandbox injects values into that server's environment or
// /run/secrets only.
package secrets
