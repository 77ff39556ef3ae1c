// Package integrity protects the gateway against MCP servers that change
// what the model sees after a human approved it.
//
// # Pinning
//
// A "rug pull" is a server changing a tool's description or schema after
// the user approved it: the approved text asked for a file name, the new
// text tells the model to send ~/.ssh/id_rsa along. The gateway pins every
// tool, prompt and resource template, and each server's initialize
// instructions ([KindInstructions]), in a lock file beside the config
// (mcpbox.lock, or NAME.lock for NAME.yaml). Per server the file holds the server's name and version and,
// per item, the sha256 of the RFC 8785 (JCS) canonical JSON of its members
// (all but _meta, icons and execution: a client may read members mcpbox
// does not know), together with that canonical definition itself, so a
// reviewer reads in a pull request exactly what was approved and a change
// can be shown as a diff.
//
// The file is deterministic: the same definitions give the same bytes on
// every run and machine, whatever key order, whitespace, number spelling
// or string escapes the server used. It carries no timestamps for that
// reason; version control records when a pin changed. Hand edits are
// caught: a definition that no longer hashes to its sha256 makes the whole
// file unreadable, and the gateway fails closed.
//
// [Pins] is the gateway's live view of one lock file. [Pins.Check] filters
// a server's list by the pin mode (enforce, tofu, warn, off), hiding new or
// changed items until a human trusts them with [Pins.Trust]; [Pins.Verify]
// repeats the check for one item at call time. Writers in different
// processes (the gateway and `mcpbox pin`) take an exclusive flock on
// PATH.flock (a file that exists only while one writes: see acquireFlock)
// and re-read the file before changing it, so neither loses the other's
// pins. [Diff] renders a change as a unified diff for humans.
//
// # Description scanning
//
// The scanner looks for instructions aimed at the model inside tool
// descriptions and schemas and server instructions (hidden text, requests
// for secrets, links to other tools); see the scan files.
package integrity
