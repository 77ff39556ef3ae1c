package audit

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Events. Every record has exactly one.
const (
	EventCall          = "call"
	EventSessionStart  = "session_start"
	EventSessionEnd    = "session_end"
	EventSandboxStart  = "sandbox_start"
	EventSandboxStop   = "sandbox_stop"
	EventSandboxCrash  = "sandbox_crash"
	EventSandboxPause  = "sandbox_pause"
	EventSandboxResume = "sandbox_resume"
	EventSnapshot      = "snapshot"
	EventEgress        = "egress"
	EventApproval      = "approval"
	EventPolicyReload  = "policy_reload"
	EventPin           = "pin"
	EventTrust         = "trust"
	EventScan          = "scan"

	// EventRestart is the restart policy's decision after a server ended:
	// Decision "restart" (Detail: restart N of MAX, delay) or "give_up"
	// (Detail: why); Error says how it ended.
	EventRestart = "restart"

	// EventServerUnavailable is a server serve could not set up (its
	// package did not install, its image did not pull, or its package
	// still installs in the background): Error says why, Detail "phase"
	// is "start", "retry" or "install". Decision "recovered" marks a
	// retry or a background install that set it up.
	EventServerUnavailable = "server_unavailable"

	// EventGatewayCrash is a serve of the state dir that ended without
	// stopping (killed, crashed), written by the next serve that finds
	// what it left: Detail "pid". The calls it had in flight have no call
	// record, and its sandboxes no sandbox_stop.
	EventGatewayCrash = "gateway_crash"

	// EventOAuthReauthorized is serve's silent login to a remote server
	// (a 401 no refresh cured, a step-up to more scope, a new
	// authorization server): Server, Client (the identity), Detail
	// "issuer", "scope" (granted) and "step_up". No person agreed to
	// this token; the record says what it holds.
	EventOAuthReauthorized = "oauth_reauthorized"

	// EventRetention is written by the store itself when it prunes old
	// records; Detail says how many and up to which seq.
	EventRetention = "retention"
	// EventIntegrity is written by the store itself when Open finds the
	// head side file ahead of the database (records deleted at the end
	// while the store was closed).
	EventIntegrity = "integrity"
)

// Events lists every event a record may have, for those who filter by one
// (mcpbox logs --event).
var Events = []string{
	EventCall, EventSessionStart, EventSessionEnd,
	EventSandboxStart, EventSandboxStop, EventSandboxCrash, EventSandboxPause, EventSandboxResume, EventSnapshot,
	EventEgress, EventSecretInject, EventSecretExfiltration, EventSecretRefused,
	EventApproval, EventPolicyReload, EventPin, EventTrust, EventScan,
	EventRestart, EventServerUnavailable, EventRetention, EventIntegrity, EventGatewayCrash,
	EventOAuthReauthorized,
}

// Outcomes of a call record (Record.Outcome): what became of the call.
const (
	OutcomeOK            = "ok"             // the server answered
	OutcomeIsError       = "is_error"       // the server answered with a tool error
	OutcomeProtocolError = "protocol_error" // the server answered with a JSON-RPC error
	OutcomeError         = "error"          // the call failed otherwise (the server ended, ...)
	OutcomeTimeout       = "timeout"        // call_timeout expired
	OutcomeCancelled     = "cancelled"      // the client gave up, or its approval was withdrawn
	OutcomeDenied        = "denied"         // the policy, a human or a key check refused it
	OutcomeRateLimited   = "rate_limited"   // a rate limit refused it
	OutcomeBlocked       = "blocked"        // the result was withheld (results_scan, credentials: block, limits.output)
	OutcomeAuditFailing  = "audit_failing"  // refused: the audit store could not write
)

// DetailTraceparent is the Detail key of a call record holding the W3C
// traceparent the client sent with the call (_meta), if any.
const DetailTraceparent = "traceparent"

// DetailNetwork is the Detail key of a failed call's record saying what
// its sandbox, which has no network (no egress), tried of one: "the
// sandbox tried the network (2 DNS queries) since it started or its last
// failed call, but has none".
const DetailNetwork = "network"

// DetailTraceID is the Detail key of a call record holding the trace id
// of mcpbox's span for the call when the client's traceparent (if any)
// does not carry it (internal/guard/trace.go).
const DetailTraceID = "trace_id"

// Outcomes lists every Outcome* constant, for readers of the audit (and a
// test that keeps the writers to it).
var Outcomes = []string{OutcomeOK, OutcomeIsError, OutcomeProtocolError, OutcomeError, OutcomeTimeout,
	OutcomeCancelled, OutcomeDenied, OutcomeRateLimited, OutcomeBlocked, OutcomeAuditFailing}

// PayloadLimit caps Record.Payload in bytes. A larger payload is replaced
// by a marker object {"truncated":true,"size":N,"head":"..."} that fits.
const PayloadLimit = 64 << 10

// Record is one audit event. The store assigns Seq, PrevHash and Hash;
// Add fills Time if it is zero.
//
// The JSON form (field names below, declaration order, Duration as float
// milliseconds, Time in UTC) is also the canonical form the hash covers;
// see the package documentation.
type Record struct {
	Seq       int64           `json:"seq"`
	Time      time.Time       `json:"time"`
	Event     string          `json:"event"`
	Client    string          `json:"client,omitempty"`
	Session   string          `json:"session,omitempty"`
	Sandbox   string          `json:"sandbox,omitempty"`
	Workspace string          `json:"workspace,omitempty"`
	Server    string          `json:"server,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Name      string          `json:"name,omitempty"` // the tool as the client calls it (with the server's prefix)
	Category  string          `json:"category,omitempty"`
	ArgShape  json.RawMessage `json:"arg_shape,omitempty"` // from Shape: never values
	Decision  string          `json:"decision,omitempty"`  // allow, deny, approved, rate_limited, ...
	Rule      string          `json:"rule,omitempty"`      // the matched rule
	Approver  string          `json:"approver,omitempty"`
	Duration  time.Duration   `json:"duration_ms"` // marshalled as float milliseconds
	// Outcome is one of Outcomes (a call record only).
	Outcome    string `json:"outcome,omitempty"`
	ResultSize int64  `json:"result_size,omitempty"`
	Files      []File `json:"files,omitempty"`
	// FilesAmbiguous: concurrent calls in one sandbox wrote meanwhile, so
	// a file of Files may be another call's.
	FilesAmbiguous bool     `json:"files_ambiguous,omitempty"`
	Domains        []Domain `json:"domains,omitempty"`
	// DomainsAmbiguous: concurrent calls in one sandbox made attribution
	// of Domains to this call uncertain.
	DomainsAmbiguous bool      `json:"domains_ambiguous,omitempty"`
	Packages         []Package `json:"packages,omitempty"`
	ExitStatus       string    `json:"exit_status,omitempty"`
	Artifacts        []string  `json:"artifacts,omitempty"`
	Findings         []string  `json:"findings,omitempty"` // scanner findings "rule@where"
	Error            string    `json:"error,omitempty"`    // redacted
	// Argv is the program and arguments of a command the built-in server
	// was asked to run (run_command, start_job), redacted and capped: the
	// one place argument values are kept, because a reviewer needs to see
	// what ran.
	Argv []string `json:"argv,omitempty"`
	// Detail holds small event-specific facts (egress host/port, pin
	// counts). Never argument values or secrets.
	Detail map[string]string `json:"detail,omitempty"`
	// Payload is kept only with Options.IncludePayloads, redacted and
	// capped at PayloadLimit.
	Payload  json.RawMessage `json:"payload,omitempty"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash,omitempty"`
}

// File is a file a call wrote or read, by path, size and digest.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	// Ambiguous: another call ran in the same sandbox meanwhile and may
	// have written it (FilesAmbiguous).
	Ambiguous bool `json:"ambiguous,omitempty"`
}

// Domain is one egress destination seen during a call.
type Domain struct {
	Host      string `json:"host"`
	Port      int    `json:"port,omitempty"`
	Decision  string `json:"decision,omitempty"`
	BytesUp   int64  `json:"bytes_up,omitempty"`
	BytesDown int64  `json:"bytes_down,omitempty"`
	Ambiguous bool   `json:"ambiguous,omitempty"`
}

// Package is a package a call installed or fetched.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Host    string `json:"host,omitempty"`
}

// plainRecord has Record's fields without its methods, so MarshalJSON can
// use the default encoding for everything but Duration.
type plainRecord Record

// millis is a duration in the JSON form of float milliseconds.
type millis time.Duration

func (m millis) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(m)/1e6, 'g', -1, 64), nil
}

func (m *millis) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f*1e6) > math.MaxInt64 {
		return fmt.Errorf("decoding duration_ms %q: not a finite number of milliseconds", b)
	}
	*m = millis(math.Round(f * 1e6))
	return nil
}

// jsonRecord shadows Duration: a field at depth 0 dominates the embedded
// one of the same name, so "duration_ms" is written once, as millis.
// encoding/json orders fields by index, so the embedded fields come in
// declaration order and duration_ms after them: a fixed order, which the
// canonical form relies on.
type jsonRecord struct {
	plainRecord
	Duration millis `json:"duration_ms"`
}

// MarshalJSON writes the record with Duration as float milliseconds and
// Time in UTC.
func (r Record) MarshalJSON() ([]byte, error) {
	r.Time = r.Time.UTC()
	return json.Marshal(jsonRecord{plainRecord(r), millis(r.Duration)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Record) UnmarshalJSON(b []byte) error {
	var j jsonRecord
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Record(j.plainRecord)
	r.Duration = time.Duration(j.Duration)
	return nil
}

// canonical is the byte string the hash covers after PrevHash: the JSON
// form of r without Hash. Precondition: r.Time is already UTC (Add makes
// it so), so decoding and re-encoding gives the same bytes.
func canonical(r Record) ([]byte, error) {
	r.Hash = ""
	return r.MarshalJSON() // not json.Marshal(r), which would re-scan the output
}
