package admin

import (
	"time"

	"mcpbox/internal/approval"
	"mcpbox/internal/integrity"
)

// The operations of the protocol, as their requests name them.
const (
	opApprovals = "approvals"
	opDecide    = "decide"
	opRevoke    = "revoke"
	opPins      = "pins"
	opTrust     = "trust"
	opPS        = "ps"
	opStats     = "stats"
	opPause     = "pause"
	opResume    = "resume"
	opStop      = "stop"
	opSnapshot  = "snapshot"
	opDiff      = "diff"
	opReload    = "reload"
	opRotate    = "rotate"
	opUI        = "ui"
)

// request is one line a client sends. Each op reads the fields it needs;
// the names are the wire format (see the package doc).
type request struct {
	Op     string `json:"op"`
	Secret string `json:"secret,omitempty"` // rotate: NAME or SERVER/NAME
	ID     string `json:"id,omitempty"`     // decide, revoke: an approval or remembered decision
	Allow  bool   `json:"allow,omitempty"`  // decide
	// For, in a decide, is who asked the instance that passes it on (a
	// dashboard's user): the decider's record names them after the
	// socket's peer, which is who is known to have asked.
	For string `json:"for,omitempty"`
	// Via, with For, is the channel the passing instance took the
	// decision in ("web"), which this one's channels must allow too.
	Via    string `json:"via,omitempty"`
	Scope  string `json:"scope,omitempty"`  // decide: once, session or always
	Server string `json:"server,omitempty"` // pins, trust
	Key    string `json:"key,omitempty"`    // trust: a tool, "prompt:NAME" or "template:URI"; "" for all
	Path   string `json:"path,omitempty"`   // snapshot: the file to write
	// Hashes are the new definitions' hashes a trust was shown; another
	// pending definition is not trusted.
	Hashes []string `json:"hashes,omitempty"`
}

// reply is the line a client gets back: one struct for every op, so that
// what a client of any version decodes stays the same.
type reply struct {
	OK         bool                  `json:"ok"`
	Error      string                `json:"error,omitempty"`
	Servers    []string              `json:"servers,omitempty"`
	Instances  int                   `json:"instances"`
	Pending    []approval.Request    `json:"pending,omitempty"`
	Remembered []approval.Remembered `json:"remembered,omitempty"`
	Changes    []PinChange           `json:"changes,omitempty"`
	Sandboxes  []Sandbox             `json:"sandboxes,omitempty"`
	// diff: a sandbox's input source and overlay upper dir.
	Lower string `json:"lower,omitempty"`
	Upper string `json:"upper,omitempty"`
	// stats: the gateway's goroutines, for leak checks (internal/load).
	Goroutines int `json:"goroutines,omitempty"`
	// ui: the base URL of the dashboard's loopback listener.
	UI string `json:"ui,omitempty"`

	// where is gather's, not the wire's: the instance that listed each
	// pending request, by its ID, when several answered.
	where map[string]string
}

// PinChange is a definition change as the admin commands show it.
type PinChange struct {
	Server  string `json:"server"`
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	Status  string `json:"status"`
	NewHash string `json:"new_hash,omitempty"`
	Diff    string `json:"diff,omitempty"`
	Name    string `json:"name,omitempty"` // as clients see it
	// Findings are the description scanner's, in the new definition:
	// "RULE [SEVERITY] at WHERE: MESSAGE". Blocked: the server has
	// scan: block, so the definition stays hidden even once trusted.
	Findings []string `json:"findings,omitempty"`
	Blocked  bool     `json:"blocked,omitempty"`
}

// Changes renders pin changes with their diffs (Name left empty).
func Changes(cs []integrity.Change) []PinChange {
	out := make([]PinChange, 0, len(cs))
	for _, c := range cs {
		out = append(out, PinChange{Server: c.Server, Kind: c.Kind, Key: c.Key, Status: c.Status, NewHash: c.NewHash, Diff: integrity.Diff(c)})
	}
	return out
}

// Sandbox is one sandbox as `mcpbox ps` shows it, or (Remote) one
// connection of the gateway to a remote server.
// Call is a call in hand at a sandbox (or a remote server's connection).
type Call struct {
	Tool    string    `json:"tool"` // as its server names it
	Started time.Time `json:"started"`
	// Waiting is "approval" while a human has yet to decide it; "": it
	// is being checked or runs.
	Waiting string `json:"waiting,omitempty"`
}

type Sandbox struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Server  string `json:"server"`
	Client  string `json:"client,omitempty"`
	Session string `json:"session,omitempty"`
	// Era is "2026-07-28" for a sandbox that serves clients of that
	// revision: a server speaks one revision per connection, so the two
	// eras' clients of one scope get a sandbox each. "": the session-based
	// revisions'.
	Era       string `json:"era,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// Output is the host dir mounted at /workspace/output, where what
	// the server writes there is found; "": none (a pod's is a claim).
	Output   string    `json:"output,omitempty"`
	Started  time.Time `json:"started,omitzero"` // zero: a remote server's connection not open
	LastCall time.Time `json:"last_call,omitzero"`
	Starts   int       `json:"starts,omitempty"` // processes started for this owner and server
	Memory   uint64    `json:"memory_bytes,omitempty"`
	Pids     uint64    `json:"pids,omitempty"`
	CPU      float64   `json:"cpu_seconds,omitempty"`
	Exit     string    `json:"exit,omitempty"`
	Reason   string    `json:"reason,omitempty"` // why the server instance stopped or failed
	Pod      string    `json:"pod,omitempty"`    // kubernetes backend: the pod that runs it
	Phase    string    `json:"phase,omitempty"`  // and the pod's phase (Pending, Running, ...)
	// Remote is a remote server's origin (scheme://host:port): the row
	// is the gateway's connection to it for this owner, which has no
	// sandbox and so no ID. "": a sandbox.
	Remote string `json:"remote,omitempty"`
	// Prepared: it started from a sandbox its server's warm pool had
	// prepared (sandbox.warm_pool), not cold.
	Prepared bool `json:"prepared,omitempty"`

	// Calls are the calls it has in hand now, oldest first: the audit
	// records a call only when it ends.
	Calls []Call `json:"calls,omitempty"`

	// Restarts counts the starts its restart policy made after the server ended.
	Restarts int `json:"restarts"`
	// Set by the client (Views): the serve instance (pid) that runs it,
	// and its project.
	Instance int    `json:"instance,omitempty"`
	Project  string `json:"project,omitempty"`
}
