package audit

// How records are shown to a person (mcpbox logs): one line of text or
// of JSON per record, safe for a terminal whatever a workload put in
// them.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONLine is the record's JSON form, byte for byte, with its sequence
// number added first as "id", on one line, and every character outside
// printable ASCII escaped: the values decode exactly, and no control or
// bidi character reaches the terminal.
func JSONLine(rec Record) ([]byte, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if len(raw) < 2 || raw[0] != '{' {
		return nil, fmt.Errorf("encoding record %d: not a JSON object", rec.Seq)
	}
	out := fmt.Appendf(nil, `{"id":%d,`, rec.Seq)
	out = append(out, raw[1:]...)
	return append(asciiJSON(out), '\n'), nil
}

// asciiJSON escapes every rune of b from DEL up as \uXXXX. Outside strings
// JSON is ASCII, so only string contents change, and they decode the same.
func asciiJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for _, r := range string(b) {
		switch {
		case r < 0x7f:
			out = append(out, byte(r))
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, "\\u%04x\\u%04x", r1, r2)
		default:
			out = fmt.Appendf(out, "\\u%04x", r)
		}
	}
	return out
}

// Line is the one-line text form of a record. Every value that is
// not a plain token is quoted (see tok): a file name, tool, session or
// domain chosen by a workload cannot start a line or send an escape.
func Line(r Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %-13s", r.Seq, r.Time.Local().Format("2006-01-02 15:04:05.000"), tok(r.Event))
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	add("client", tok(r.Client))
	add("session", tok(r.Session))
	add("sandbox", tok(r.Sandbox))
	if r.Name != "" {
		add("tool", tok(r.Name)) // as the client calls it
	} else if r.Server != "" && r.Tool != "" {
		add("tool", tok(r.Server+"/"+r.Tool))
	} else {
		add("server", tok(r.Server))
		add("tool", tok(r.Tool))
	}
	if len(r.Argv) > 0 {
		add("argv", tok(strings.Join(r.Argv, " ")))
	}
	add("decision", tok(r.Decision))
	if r.Event == EventApproval {
		// Which request or remembered decision, and for how long: an
		// "always" allow reads apart from a "once".
		add("id", tok(r.Detail["id"]))
		if r.Detail["scope"] != "" && r.Detail["scope"] != "once" {
			add("scope", tok(r.Detail["scope"]))
		}
	}
	add("rule", tok(r.Rule))
	add("approver", tok(r.Approver))
	add("outcome", tok(r.Outcome))
	if r.Event == EventCall {
		add("duration", tok(r.Duration.Round(time.Microsecond).String()))
		if r.ResultSize > 0 {
			add("bytes", fmt.Sprint(r.ResultSize))
		}
	}
	for _, f := range r.Files {
		v := fmt.Sprintf("%s(%d)", tok(f.Path), f.Size)
		if f.Ambiguous {
			v += "?"
		}
		add("file", v)
	}
	for _, d := range r.Domains {
		v := fmt.Sprintf("%s:%d(%s)", tok(d.Host), d.Port, tok(d.Decision))
		if d.Ambiguous {
			v += "?"
		}
		add("domain", v)
	}
	for _, p := range r.Packages {
		add("package", tok(p.Name+"@"+p.Version))
	}
	add("exit", tok(r.ExitStatus))
	if len(r.Findings) > 0 {
		add("findings", tok(strings.Join(r.Findings, ",")))
	}
	// Which secret the proxy added or refused, and where (secret_*
	// events); a call's, by NAME@HOST:PORT. Never a value.
	add("secret", tok(r.Detail["secret"]))
	add("where", tok(r.Detail["where"]))
	add("secrets_injected", tok(r.Detail["secrets_injected"]))
	add("secrets_refused", tok(r.Detail["secrets_refused"]))
	add("by", tok(r.Detail["by"]))         // who paused, resumed or stopped a sandbox
	add("phase", tok(r.Detail["phase"]))   // "package install": not the server's own connection
	add("reason", tok(r.Detail["reason"])) // why a connection or approval was refused
	add("error", tok(r.Error))
	// What a failed call's sandbox without network tried of one: often
	// why it failed, and the hint that network.egress is missing.
	add("network", tok(r.Detail[DetailNetwork]))
	return b.String()
}

// tok returns s if it is a plain token (printable, no space, no quote,
// backslash or parenthesis, which the line's syntax uses), else s quoted
// with strconv.Quote, which escapes control, format (bidi) and invalid
// bytes. The empty string stays empty: add leaves such fields out.
func tok(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || r == ' ' || !unicode.IsPrint(r) || strings.ContainsRune(`"\()`, r) {
			return strconv.Quote(s)
		}
	}
	return s
}
