// Package track keeps the records of a gateway's sandboxes: which ones
// run (and the last ones that ended) for each launcher and scope, and,
// per sandbox, the calls in flight, the egress connections and the files
// of its writable mounts, so that a call's audit record can be joined
// with what its sandbox did while it ran.
//
// The launcher fills a Sandbox as it starts one and feeds it the egress
// proxy's events; the guard (internal/guard) reads it around each call
// and for `mcpbox ps`, stop, pause and snapshot. Both import it, and it
// imports neither: it decides nothing, starts nothing and writes no audit
// record itself (it fills the fields of one), and must not import
// internal/cli, internal/guard or a launcher.
package track
