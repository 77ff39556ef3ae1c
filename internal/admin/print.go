package admin

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"mcpbox/internal/approval"
	"mcpbox/internal/config"
	"mcpbox/internal/instance"
	"mcpbox/internal/integrity"
	"mcpbox/internal/policy"
)

// jsonLines is the encoder of a --json listing on w. It writes every
// character a terminal would act on (config.ActsOnTerminal) as \uXXXX,
// the C1 controls and bidirectional overrides included, which JSON itself
// may leave raw: a tool name a hostile server chose cannot drive the
// terminal of someone reading the listing there. JSON is ASCII outside
// its strings, so only string contents change, and they decode the same.
func jsonLines(w io.Writer) *json.Encoder { return json.NewEncoder(termSafeJSON{w}) }

type termSafeJSON struct{ w io.Writer }

func (t termSafeJSON) Write(b []byte) (int, error) {
	if !bytes.ContainsFunc(b, config.ActsOnTerminal) {
		return t.w.Write(b)
	}
	out := make([]byte, 0, len(b)+32)
	for _, r := range string(b) { // the encoder writes valid UTF-8
		if config.ActsOnTerminal(r) {
			out = fmt.Appendf(out, `\u%04x`, r) // all in the BMP
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// instanceJSON is an instance as `ps --instances --json` prints it.
type instanceJSON struct {
	ID string `json:"id"`
	instance.Record
	Sandboxes int    `json:"sandboxes"`
	Error     string `json:"error,omitempty"`
}

// WriteInstances prints the gateways of views, as a table (with a line
// for each server one of them could not set up) or, asJSON, one object
// per line.
func WriteInstances(w io.Writer, views []View, asJSON bool) {
	if asJSON {
		enc := jsonLines(w)
		for _, v := range views {
			j := instanceJSON{ID: strconv.Itoa(v.Record.PID), Record: v.Record, Sandboxes: v.sandboxCount()}
			if v.Err != nil {
				j.Error = v.Err.Error()
			}
			_ = enc.Encode(j)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tPROJECT\tCONFIG\tTRANSPORT\tURL\tSTARTED\tSANDBOXES\tSTATE DIR")
	for _, v := range views {
		r := v.Record
		n := strconv.Itoa(v.sandboxCount())
		if v.Err != nil {
			n = "? (" + OneLine(v.Err.Error(), 40) + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.PID, cell(r.Project), cell(cmp.Or(r.Config, "(default)")),
			cell(r.Transport), cell(cmp.Or(r.URL, "-")), r.Started.Local().Format("15:04:05"), n, cell(r.StateDir))
	}
	tw.Flush()
	for _, v := range views {
		if f := v.Record.TokenFile; f != "" {
			fmt.Fprintf(w, "instance %d: its HTTP endpoint wants \"Authorization: Bearer TOKEN\" with the token in %s (mcpbox token rotate makes a new one)\n", v.Record.PID, cell(f))
		}
	}
	for _, v := range views {
		for _, line := range unavailable(v) {
			fmt.Fprintln(w, line)
		}
	}
}

// sandboxCount counts v's sandboxes that are there (running, paused,
// starting), not the ones stopped or given up on that ps still lists,
// nor its connections to remote servers.
func (v View) sandboxCount() int {
	n := 0
	for _, s := range v.Sandboxes {
		if s.Remote == "" && s.State != "stopped" && s.State != "failed" { // gateway.StateStopped, StateFailed
			n++
		}
	}
	return n
}

// unavailable is a line for each server v's instance could not set up.
func unavailable(v View) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(v.Record.Unavailable)) {
		out = append(out, fmt.Sprintf("instance %d: server %s is unavailable: %s", v.Record.PID, cell(name), cell(v.Record.Unavailable[name])))
	}
	return out
}

// Notes are what the sandbox lines of `ps --json` cannot carry, one line
// each, for stderr: an instance that did not list its sandboxes (so none
// of them is printed), and the servers an instance could not set up (as
// WriteInstances prints them below its table).
func Notes(views []View) []string {
	var out []string
	for _, v := range views {
		if v.Err != nil {
			out = append(out, fmt.Sprintf("instance %d (%s): its sandboxes could not be listed: %s", v.Record.PID, cell(v.Record.Project), OneLine(v.Err.Error(), 200)))
		}
		out = append(out, unavailable(v)...)
	}
	return out
}

// WriteSandboxes prints the sandboxes of views, as a table or, asJSON,
// one object per line; now dates their last calls.
func WriteSandboxes(w io.Writer, views []View, asJSON bool, now time.Time) {
	var sandboxes []Sandbox
	stateDir := map[int]string{} // by instance
	for _, v := range views {
		sandboxes = append(sandboxes, v.Sandboxes...)
		stateDir[v.Record.PID] = v.Record.StateDir
	}
	if asJSON {
		enc := jsonLines(w)
		for _, s := range sandboxes {
			_ = enc.Encode(s)
		}
		return
	}
	if len(sandboxes) == 0 {
		// Servers start at a client's first session, not at serve's.
		fmt.Fprintln(w, "no sandboxes yet: a server's sandbox starts when a client first connects")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tRESTARTS\tSERVER\tCLIENT\tSTARTED\tLAST CALL\tMEMORY\tPIDS\tCPU\tEXIT\tINSTANCE\tPOD / REMOTE\tOUTPUT")
	for _, s := range sandboxes {
		last := "-"
		switch {
		case len(s.Calls) > 0:
			last = CallsNow(s.Calls, now)
		case !s.LastCall.IsZero():
			last = now.Sub(s.LastCall).Round(time.Second).String() + " ago"
		}
		mem, pids, cpu := "-", "-", "-" // not measured: a pod, an ended sandbox
		if s.Memory > 0 {
			mem, pids, cpu = HumanBytes(s.Memory), fmt.Sprint(s.Pids), fmt.Sprintf("%.1fs", s.CPU)
		}
		client := s.Client
		if s.Era != "" {
			client = strings.TrimSpace(client + " (" + s.Era + ")")
		}
		started := "-" // a remote server's connection not open now
		if !s.Started.IsZero() {
			started = s.Started.Local().Format("15:04:05")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", cmp.Or(s.ID, "-"), s.State, s.Restarts, s.Server, client,
			started, last, mem, pids, cpu, cmp.Or(OneLine(s.Exit, 40), OneLine(s.Reason, 40), "-"), s.Instance, cmp.Or(strings.TrimSpace(s.Pod+" "+s.Phase), s.Remote, "-"),
			cell(cmp.Or(underStateDir(s.Output, stateDir[s.Instance]), "-")))
	}
	tw.Flush()
}

// underStateDir is dir relative to the instance's state dir (which the
// instances' table names) when it is beneath it, else dir.
func underStateDir(dir, stateDir string) string {
	if rest, ok := strings.CutPrefix(dir, stateDir+"/"); ok && stateDir != "" {
		return rest
	}
	return dir
}

// CallsNow says what calls are in hand, for the LAST CALL column: the
// oldest, how long it has run or waited for approval, and how many more
// there are ("search running 12s +2").
func CallsNow(calls []Call, now time.Time) string {
	c := calls[0]
	how := "running"
	if c.Waiting != "" {
		how = "awaits " + c.Waiting
	}
	out := fmt.Sprintf("%s %s %s", OneLine(c.Tool, 30), how, now.Sub(c.Started).Round(time.Second))
	if len(calls) > 1 {
		out += fmt.Sprintf(" +%d", len(calls)-1)
	}
	return out
}

// HumanBytes writes n bytes for a person: in the largest binary unit
// that leaves at least 1, with one decimal below 10 (32956416 is
// "31Mi", 1610612736 "1.5Gi"), not config.Size's exact "32184Ki".
func HumanBytes(n uint64) string {
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	v, i := float64(n), 0
	for ; v >= 1024 && i < len(units)-1; i++ {
		v /= 1024
	}
	if i > 0 && v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64) + units[i]
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + units[i]
}

// cell is a path or name of an instance (a project's directory, a config
// file, a state dir a config chose) as a table cell or a line shows it:
// what a terminal would act on escaped, line breaks and tabs too, so that
// it can neither drive the terminal nor break the table.
func cell(s string) string {
	return config.PrintableLine(strings.ReplaceAll(s, "\t", `\t`))
}

// OneLine is s on one line (runs of white space as one space), cut to n
// runes with an ellipsis.
func OneLine(s string, n int) string {
	s = config.Printable(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// WriteChange prints a pending definition change as `mcpbox trust`
// shows it: what changed, its diff, the scanner's findings, and whether
// scan: block keeps it hidden once trusted.
// The server chose the definition: a C1 control or a bidirectional
// override in it (valid JSON, as written) is shown escaped.
func WriteChange(w io.Writer, c PinChange) {
	fmt.Fprintln(w, config.Printable(fmt.Sprintf("%s %s %s\n%s", c.Status, c.Kind, cmp.Or(c.Name, c.Server+"/"+c.Key), c.Diff)))
	for _, f := range c.Findings {
		fmt.Fprintf(w, "  scanner: %s\n", config.Printable(f))
	}
	if c.Blocked {
		fmt.Fprintf(w, "  the server has scan: block: this definition stays hidden even if trusted\n")
	}
}

// WriteTrusted says what a trust did: how many definitions it pinned,
// and how many of them scan: block keeps hidden all the same.
func WriteTrusted(w io.Writer, trusted []PinChange) {
	fmt.Fprintf(w, "trusted %d definition(s); clients were told their lists changed\n", len(trusted))
	blocked := 0
	for _, c := range trusted {
		if c.Blocked {
			blocked++
		}
	}
	if blocked > 0 {
		fmt.Fprintf(w, "%d of them stay hidden: the scanner finds what is shown above in them and the server has scan: block\n", blocked)
	}
}

// WriteApprovals prints the pending requests and remembered decisions of
// r as `mcpbox approvals` shows them: a table of each, every argument of
// a waiting call below the first (keys quoted, long values folded: the
// summary column is cut), and a trust request's summary whole (its
// scanner findings); asJSON, one object per line, whole and redacted.
func WriteApprovals(w io.Writer, r Approvals, asJSON bool) {
	if asJSON {
		enc := jsonLines(w)
		for _, p := range r.Pending {
			line := map[string]any{"id": p.ID, "state": "pending", "request": p}
			if r.Where[p.ID] != "" {
				line["instance"] = r.Where[p.ID]
			}
			_ = enc.Encode(line)
		}
		for _, m := range r.Remembered {
			_ = enc.Encode(map[string]any{"id": m.ID, "state": "remembered", "decision": m})
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	where := ""
	if len(r.Where) > 0 {
		where = "\tINSTANCE" // several answered: whose is each
	}
	if len(r.Pending) == 0 {
		// Not a bare header, which reads like output cut short.
		fmt.Fprintln(tw, "no calls or definition changes wait for approval")
	} else {
		fmt.Fprintln(tw, "ID\tKIND\tCLIENT\tSERVER\tTOOL\tRULE"+where+"\tSUMMARY")
	}
	for _, p := range r.Pending {
		inst := ""
		if where != "" {
			inst = "\t" + cell(cmp.Or(r.Where[p.ID], "-"))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s%s\t%s\n", p.ID, p.Kind, p.Client, p.Server, cmp.Or(p.Name, p.Tool), p.Rule, inst, OneLine(integrity.Escaped(p.Summary), 80))
	}
	tw.Flush()
	for _, p := range r.Pending {
		switch {
		case len(p.Arguments) > 0:
			fmt.Fprintf(w, "\n%s %s arguments:\n%s\n", p.ID, cmp.Or(p.Name, p.Server+"/"+p.Tool), approval.Show(p.Arguments))
		case p.Kind == approval.KindTrust && len([]rune(OneLine(integrity.Escaped(p.Summary), 1<<20))) > 80:
			fmt.Fprintf(w, "\n%s %s change:\n  %s\n", p.ID, cmp.Or(p.Name, p.Server+"/"+p.Tool), integrity.Escaped(p.Summary))
		}
		if note := approval.WiderNote(p, "", policy.RuleName(p.Rule)); note != "" {
			fmt.Fprintf(w, "\n%s approved for the session or always: %s\n", p.ID, config.Printable(note))
		}
	}
	if len(r.Remembered) > 0 {
		fmt.Fprintln(w, "\nREMEMBERED")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSCOPE\tCLIENT\tSERVER\tTOOL\tBY")
		for _, m := range r.Remembered {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Scope, m.Client, m.Server, cmp.Or(m.Name, m.Tool), m.By)
		}
		tw.Flush()
	}
}

// Decided says what `mcpbox approve` or `mcpbox deny` did to req (as the
// instance listed it when deciding; its ID alone if it no longer did).
func Decided(req approval.Request, allow bool, scope string) string {
	switch {
	case !allow:
		return "denied " + req.ID
	case req.Kind == approval.KindTrust:
		return fmt.Sprintf("approved %s: the changed definition %s/%s is trusted", req.ID, req.Server, req.Tool)
	}
	msg := "approved (" + cmp.Or(scope, approval.ScopeOnce) + ") " + req.ID
	if note := approval.WiderNote(req, cmp.Or(scope, approval.ScopeOnce), policy.RuleName(req.Rule)); note != "" {
		// The person chose for calls like this one; the grant is wider.
		msg += ": " + note
		if scope == approval.ScopeAlways {
			msg += " (mcpbox approvals lists the decision; approvals revoke ID forgets it)"
		}
	}
	return config.Printable(msg)
}
