package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/audit"
	"mcpbox/internal/daemon"
)

const logsHelp = `USAGE
  mcpbox logs [filters] [--follow] [--json] [--config FILE | --state-dir DIR]
  mcpbox logs verify [--config FILE | --state-dir DIR]

Prints the audit log of the gateway that uses that state dir (running or
not; with neither flag, the state dir of the project the current
directory is in, which every instance of the project shares), in the
order the records were written: one line per record, or with --json one
JSON object per line (its sequence number in "id"). A record's time is
when what it records began, and a call or an egress connection is
written when it ends: a long one shows an earlier time than the records
before it. --follow keeps printing new records until interrupted.

FILTERS
  --client NAME --server NAME --sandbox ID --session ID
  --tool NAME   a tool as clients call it (github__create_issue), its
                server's own name for it (create_issue), or SERVER/TOOL
  --event call|session_start|session_end|sandbox_start|sandbox_stop|
          sandbox_crash|sandbox_pause|sandbox_resume|snapshot|egress|
          secret_inject|secret_exfiltration|secret_refused|approval|
          policy_reload|pin|trust|scan|restart|server_unavailable|
          retention|integrity|gateway_crash|oauth_reauthorized
  --decision allow|deny|approved|denied|rate_limited|...
  --since 1h | 2026-12-01T10:00:00Z      --limit N (the newest N)

verify checks the hash chain: it exits 1 and names the records when one
was edited or deleted; when it is intact, it prints the head hash (copy it
elsewhere: someone who can rewrite the database and its head file can
forge a consistent history, but not one that ends in your copy).
`

func (e *env) logs(args []string) int {
	fs := e.newFlagSet("logs", logsHelp)
	af := registerOneDirFlags(fs)
	var f audit.Filter
	fs.StringVar(&f.Client, "client", "", "only records of client `NAME`")
	fs.StringVar(&f.Server, "server", "", "only records of server `NAME`")
	tool := fs.String("tool", "", "only records of tool `NAME` (as clients call it, or SERVER/TOOL)")
	fs.StringVar(&f.Sandbox, "sandbox", "", "only records of sandbox `ID`")
	fs.StringVar(&f.Session, "session", "", "only records of session `ID`")
	fs.StringVar(&f.Event, "event", "", "only records of `EVENT`")
	fs.StringVar(&f.Decision, "decision", "", "only records with `DECISION`")
	since := fs.String("since", "", "only records since `WHEN` (a duration ago, or RFC 3339)")
	limit := fs.Int("limit", 0, "only the newest `N` records")
	follow := fs.Bool("follow", false, "keep printing new records")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	verify := len(args) > 0 && args[0] == "verify"
	if verify {
		args = args[1:]
	}
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if fs.NArg() != 0 {
		e.errorf("logs: unexpected arguments %q", fs.Args())
		return exitUsage
	}
	var listing []string // flags verify, which checks the whole log, does not take
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name != "config" && fl.Name != "state-dir" {
			listing = append(listing, "--"+fl.Name)
		}
	})
	if verify && len(listing) > 0 {
		e.errorf("logs verify: %s: verify checks the whole log and takes only --config or --state-dir", strings.Join(listing, " "))
		return exitUsage
	}
	if f.Event != "" && !slices.Contains(audit.Events, f.Event) {
		e.errorf("logs: --event %q: no record has it; the events are %s", f.Event, strings.Join(audit.Events, ", "))
		return exitUsage
	}
	if *limit < 0 {
		e.errorf("logs: --limit %d: want a number of records (0: all)", *limit)
		return exitUsage
	}
	f.SetTool(*tool)
	if *since != "" {
		t, err := audit.ParseSince(*since, time.Now())
		if err != nil {
			e.errorf("logs: --since: %v", err)
			return exitUsage
		}
		f.Since = t
	}
	dir, ok := af.dir(e, "logs")
	if !ok {
		return exitUsage
	}
	if dir == admin.AllStateDirs {
		e.errorf("logs: --all: the audit log is one state dir's; run it in the project or pass --config or --state-dir (mcpbox ps --all shows each instance's state dir)")
		return exitUsage
	}
	path := filepath.Join(dir, "audit.db")
	if _, err := os.Stat(path); err != nil {
		e.errorf("logs: no audit log in %s (has mcpbox serve run with this state dir?)", dir)
		return 1
	}
	r, err := audit.OpenReader(path)
	if err != nil {
		e.errorf("logs: %v", err)
		return 1
	}
	defer r.Close()
	ctx, cancel := daemon.SignalContext(context.Background())
	defer cancel()
	if verify {
		return e.verifyLog(ctx, r)
	}
	print := func(rec audit.Record) error { return e.printRecord(rec, *asJSON) }
	recs, err := r.Query(ctx, f)
	if err != nil {
		e.errorf("logs: %v", err)
		return 1
	}
	if len(recs) == 0 {
		for _, msg := range r.Unknown(ctx, f) {
			e.errorf("logs: %s", msg)
		}
	}
	if *limit > 0 && len(recs) > *limit {
		recs = recs[len(recs)-*limit:]
	}
	for _, rec := range recs {
		if err := print(rec); err != nil {
			return 1
		}
		f.AfterSeq = rec.Seq
	}
	if !*follow {
		return 0
	}
	if err := r.Follow(ctx, f, print); err != nil && !errors.Is(err, context.Canceled) {
		e.errorf("logs: %v", err)
		return 1
	}
	return 0
}

func (e *env) verifyLog(ctx context.Context, r *audit.Reader) int {
	rep, err := r.Verify(ctx)
	if err != nil {
		e.errorf("logs verify: %v", err)
		return 1
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(e.stdout, p)
	}
	fmt.Fprintln(e.stdout, rep)
	if !rep.OK() {
		return 1
	}
	return 0
}

// printRecord writes one record as a line of text or JSON. Both are safe
// for a terminal: the text quotes every field that is not a plain token,
// the JSON escapes everything outside printable ASCII.
func (e *env) printRecord(rec audit.Record, asJSON bool) error {
	if asJSON {
		line, err := audit.JSONLine(rec)
		if err != nil {
			return err
		}
		_, err = e.stdout.Write(line)
		return err
	}
	_, err := fmt.Fprintln(e.stdout, audit.Line(rec))
	return err
}
