// Package guard is the policy layer of `mcpbox serve` around the
// gateway: which definitions a client sees (pins, the description
// scanner, the tool policy), whether a call runs (argument keys, rate
// limits, policy, human approval), what comes back (result scan,
// credentials), and one audit record of each, committed before the
// result is passed on.
//
// It plugs into internal/gateway only through gateway.Hooks (Hooks), and
// reads the per-sandbox records of internal/track, which the launcher
// fills (SandboxStarted, SandboxEnded, SandboxEvent, EgressEvent), to
// join each call with the files and domains of its sandbox. It also backs
// the admin commands that act on that state (approvals, trust, ps,
// stop, pause, snapshot).
//
// It must not import internal/cli, parse flags or print: internal/daemon
// wires it (New, Hooks, Attach, Admin, Close); `mcpbox run` uses only
// CredentialCheck. It starts no sandbox itself.
package guard
