package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// hostile are strings a workload or a server chooses: a file name, tool,
// session or domain. Each tries to forge a record line or drive the
// operator's terminal.
var hostile = []string{
	"a\n999 2026-12-01 10:00:00.000 call          decision=allow",
	"\x1b]0;pwned\x07title",
	"\x1b[2J\x1b[31mred",
	"abc\u202edcba\u2066x\u2069",
	"cr\rover",
	"del\x7f c1\u009b2J",
	"zero\u200bwidth",
	"bad\xffutf8",
	`quote" key=value`,
	"",
}

// hostileRecord puts s in every string field of a record.
func hostileRecord(seq int64, s string) Record {
	return Record{
		Seq: seq, Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Event: s,
		Client: s, Session: s, Sandbox: s, Workspace: s, Server: s, Tool: s, Category: s,
		Decision: s, Rule: s, Approver: s, Duration: 1500 * time.Microsecond, Outcome: s,
		ResultSize: 1<<53 + 1,
		Files:      []File{{Path: s, Size: 3, SHA256: s}, {Path: "plain.txt", Size: 1}},
		Domains:    []Domain{{Host: s, Port: 443, Decision: s, Ambiguous: true}},
		Packages:   []Package{{Name: s, Version: s, Host: s}},
		ExitStatus: s, Artifacts: []string{s}, Findings: []string{s, s}, Error: s,
		Detail:   map[string]string{s + "k": s, "reason": s},
		ArgShape: json.RawMessage(`{"z":"string","a":[1e400]}`),
		PrevHash: s, Hash: s,
	}
}

// terminalUnsafe reports a byte or character that a terminal may act on:
// C0 controls (the line's newline aside), DEL, C1 controls, format
// characters (bidi overrides and isolates, zero width), invalid UTF-8.
func terminalUnsafe(s string) (rune, bool) {
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			return r, true
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Cf, r) {
			return r, true
		}
	}
	return 0, false
}

// TestLineOneLinePerRecord: mcpbox logs prints each record on one line,
// which no field can break or use to drive the terminal.
func TestLineOneLinePerRecord(t *testing.T) {
	var out bytes.Buffer
	for i, s := range hostile {
		out.WriteString(Line(hostileRecord(int64(i+1), s)) + "\n")
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(hostile) {
		t.Fatalf("%d records printed as %d lines:\n%s", len(hostile), len(lines), out.String())
	}
	for i, line := range lines {
		if r, bad := terminalUnsafe(line); bad {
			t.Errorf("line %d has %U: %q", i+1, r, line)
		}
		if want := strconv.Itoa(i+1) + " "; !strings.HasPrefix(line, want) {
			t.Errorf("line %d does not start with its seq: %q", i+1, line)
		}
	}
	// A plain token is printed as is; the hostile ones are quoted.
	plain := Line(Record{Seq: 1, Event: EventCall, Server: "fs", Tool: "read_file",
		Files: []File{{Path: "out/report.md", Size: 12}}})
	if !strings.Contains(plain, " tool=fs/read_file ") || !strings.Contains(plain, " file=out/report.md(12)") {
		t.Errorf("plain fields quoted: %q", plain)
	}
	// An egress refusal says why, and so what to change.
	why := "no rule allows example.com:443 (to allow it: ...)"
	refused := Line(Record{Seq: 2, Event: EventEgress, Server: "fs", Decision: "deny",
		Domains: []Domain{{Host: "example.com", Port: 443, Decision: "deny"}}, Detail: map[string]string{"reason": why}})
	if !strings.Contains(refused, " reason="+strconv.Quote(why)) {
		t.Errorf("an egress refusal's line does not give its reason: %q", refused)
	}
	if line := Line(hostileRecord(1, hostile[0])); !strings.Contains(line, ` file="a\n999 2026`) {
		t.Errorf("a file name with a newline is not quoted: %q", line)
	}
}

// TestJSONLineRoundTrips: mcpbox logs --json prints each record as one
// line of printable ASCII that decodes to the same record, with its id.
func TestJSONLineRoundTrips(t *testing.T) {
	var out bytes.Buffer
	var want []Record
	for i, s := range hostile {
		rec := hostileRecord(int64(i+1), strings.ToValidUTF8(s, "\uFFFD")) // JSON holds UTF-8 only
		want = append(want, rec)
		line, err := JSONLine(rec)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(line)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d records printed as %d lines", len(want), len(lines))
	}
	for i, line := range lines {
		for _, c := range []byte(line) {
			if c < 0x20 || c >= 0x7f {
				t.Fatalf("line %d has byte %#x: %q", i+1, c, line)
			}
		}
		raw, _ := json.Marshal(want[i])
		var got Record
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		gotRaw, _ := json.Marshal(got)
		if !bytes.Equal(raw, gotRaw) {
			t.Errorf("record %d does not round-trip:\n%s", i+1, cmp.Diff(string(raw), string(gotRaw)))
		}
		var id struct{ ID int64 }
		if err := json.Unmarshal([]byte(line), &id); err != nil || id.ID != want[i].Seq {
			t.Errorf("line %d: id %d, want %d (%v)", i+1, id.ID, want[i].Seq, err)
		}
	}
}

// TestLineShowsPhase: an installer's egress record says so in the text
// line, apart from the server's own connections.
func TestLineShowsPhase(t *testing.T) {
	r := Record{Event: EventEgress, Server: "github", Decision: "allow", Detail: map[string]string{"phase": "package install"},
		Domains: []Domain{{Host: "registry.npmjs.org", Port: 443, Decision: "allow"}}}
	if got := Line(r); !strings.Contains(got, `phase="package install"`) {
		t.Errorf("Line = %q, want the phase", got)
	}
}

// TestLineShowsNetwork: a failed call's line says what its sandbox,
// which has no network, tried of one (before, only --json had it).
func TestLineShowsNetwork(t *testing.T) {
	note := "the sandbox tried the network (2 DNS queries) since it started or its last failed call, but has none"
	r := Record{Event: EventCall, Server: "fetch", Tool: "get", Decision: "allow", Outcome: OutcomeError, Error: "fetch failed",
		Detail: map[string]string{DetailNetwork: note}}
	if got := Line(r); !strings.Contains(got, ` error="fetch failed" network=`+strconv.Quote(note)) {
		t.Errorf("Line = %q, want the network note after the error", got)
	}
}

// TestLineShowsSecrets: a secret event's line names the secret and where
// it went; a call's, the secrets added or refused during it (before,
// only --json had them).
func TestLineShowsSecrets(t *testing.T) {
	inject := Record{Event: EventSecretInject, Decision: "allow", Detail: map[string]string{"secret": "API_KEY", "where": "header Authorization", "host": "api.example", "port": "443"}}
	if got := Line(inject); !strings.Contains(got, ` secret=API_KEY where="header Authorization"`) {
		t.Errorf("Line = %q, want the secret and where", got)
	}
	call := Record{Event: EventCall, Decision: "allow", Detail: map[string]string{"secrets_injected": "API_KEY@api.example:443", "secrets_refused": "API_KEY@evil.example:443"}}
	if got := Line(call); !strings.Contains(got, " secrets_injected=API_KEY@api.example:443 secrets_refused=API_KEY@evil.example:443") {
		t.Errorf("Line = %q, want the secrets of the call", got)
	}
}

// TestLineShowsApproval: an approval's line names the request or the
// remembered decision and a scope other than once; a file of an
// overlapping call is marked.
func TestLineShowsApproval(t *testing.T) {
	for _, tt := range []struct {
		r          Record
		want, none string
	}{
		{Record{Event: EventApproval, Decision: "approved", Approver: "cli:uid=0", Detail: map[string]string{"id": "apr_abc", "scope": "always"}}, "decision=approved id=apr_abc scope=always approver=cli:uid=0", ""},
		{Record{Event: EventApproval, Decision: "approved", Detail: map[string]string{"id": "apr_abc", "scope": "once"}}, "id=apr_abc", "scope="},
		{Record{Event: EventApproval, Decision: "revoked", Approver: "cli:uid=0", Detail: map[string]string{"id": "apr_abc"}}, "decision=revoked id=apr_abc", ""},
		{Record{Event: EventCall, Files: []File{{Path: "/workspace/output/a", Size: 3, Ambiguous: true}}}, "file=/workspace/output/a(3)?", ""},
	} {
		got := Line(tt.r)
		if !strings.Contains(got, tt.want) || tt.none != "" && strings.Contains(got, tt.none) {
			t.Errorf("Line = %q, want %q", got, tt.want)
		}
	}
}

// TestShapeOfTooManyValues: arguments with more values than MaxValues
// are summarised by their count, not decoded, whether keys or elements;
// Values counts outside strings only.
func TestShapeOfTooManyValues(t *testing.T) {
	if n := Values([]byte(`{"a:b":"c:d,[{","e":{"f\"":1},"g":[{"h":2},3]}`)); n != 12 {
		t.Errorf("Values = %d, want 12", n)
	}
	for _, big := range [][]byte{
		[]byte(`{` + strings.Repeat(`"k":1,`, MaxValues/2) + `"k":1}`),
		[]byte(`{"a":[` + strings.Repeat(`{},`, MaxValues/2) + `{}]}`),
	} {
		if got := string(Shape(big)); !strings.HasPrefix(got, `{"values":`) {
			t.Errorf("Shape of %d values = %.80s", Values(big), got)
		}
	}
	if got := string(Shape([]byte(`{"path":"/a:b"}`))); !strings.Contains(got, `"path"`) {
		t.Errorf("Shape of a small object = %s", got)
	}
}
