package approval

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

const secret = "s3cr3tvalue"

func redactSecret(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED:TOKEN]") }

func TestSummary(t *testing.T) {
	long := strings.Repeat("abcdefghij", 5) // 50 characters
	for _, tc := range []struct {
		name   string
		args   string
		redact func(string) string
		want   string
	}{
		{"types only without redactor", `{"repo":"octo/x","title":"` + long + `","n":3,"draft":true,"x":null}`, nil,
			`{"repo": string(6), "title": string(50), "n": number(1), "draft": true, "x": null}`},
		{"values after redaction", `{"repo":"octo/x","token":"Bearer ` + secret + `"}`, redactSecret,
			`{"repo": "octo/x", "token": "Bearer [REDACTED:TOKEN]"}`},
		{"keys keep their order", `{"z":1,"a":2,"m":3}`, redactSecret, `{"z": 1, "a": 2, "m": 3}`},
		{"long string cut to 40", `{"body":"` + long + `"}`, redactSecret,
			`{"body": "` + long[:39] + `…"(50 chars)}`},
		{"redacted before cut", `{"k":"` + strings.Repeat("x", 35) + secret + `"}`, redactSecret,
			`{"k": "` + strings.Repeat("x", 35) + `[RED…"(46 chars)}`},
		{"secret in a key", `{"` + secret + `":1}`, redactSecret, `{"[REDACTED:TOKEN]": 1}`},
		{"control characters", `{"p":"a\nb\u001b[2J\u202e"}`, redactSecret, `{"p": "a?b?[2J?"}`},
		{"arrays cut to five", `[1,2,3,4,5,6,7]`, redactSecret, `[1, 2, 3, 4, 5, … (7 items)]`},
		{"nesting cut at three", `{"a":{"b":{"c":{"d":1}},"e":[[[1]]]}}`, redactSecret, `{"a": {"b": {"c": {…}}, "e": [[…]]}}`},
		{"top-level string", `"hi"`, redactSecret, `"hi"`},
		{"empty object", `{}`, nil, `{}`},
		{"no arguments", ``, nil, `(no arguments)`},
		{"blank", " \n", nil, `(no arguments)`},
		{"not json", `{"a":`, redactSecret, `(arguments are not valid JSON, 5 bytes)`},
		{"trailing data", `{} {}`, redactSecret, `(arguments are not valid JSON, 5 bytes)`},
		{"number redacted too", `{"pin":` + "12345678" + `}`, func(s string) string { return strings.ReplaceAll(s, "12345678", "[REDACTED:PIN]") },
			`{"pin": [REDACTED:PIN]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Summary(json.RawMessage(tc.args), tc.redact); got != tc.want {
				t.Errorf("Summary(%s)\n got %s\nwant %s", tc.args, got, tc.want)
			}
		})
	}
}

func TestSummaryBounded(t *testing.T) {
	var items []string
	for range 10000 {
		items = append(items, `{"k":"`+strings.Repeat("v", 100)+`"}`)
	}
	args := `{"a":[` + strings.Join(items, ",") + `],` + strings.Repeat(`"x":"y",`, 1000) + `"z":1}`
	got := Summary(json.RawMessage(args), redactSecret)
	if n := utf8.RuneCountInString(got); n != MaxSummary || !strings.HasSuffix(got, "…") {
		t.Errorf("summary has %d characters, want %d ending in …: %s", n, MaxSummary, got)
	}
	if !strings.HasPrefix(got, `{"a": [{"k": "vvvv`) {
		t.Errorf("summary starts %.40s", got)
	}
}

// FuzzSummary checks the properties the approver relies on: short, one
// clean line, and the redactor's secret never shown.
func FuzzSummary(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"` + secret + `"}`, `[1,[2,[3,[4]]]]`, `{"k":"\u202e\n"}`, `"x"`, `{"a":`, `null`, "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		for _, redact := range []func(string) string{nil, redactSecret} {
			got := Summary(json.RawMessage(args), redact)
			if n := utf8.RuneCountInString(got); n > MaxSummary {
				t.Fatalf("%d characters", n)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("invalid UTF-8: %q", got)
			}
			for _, r := range got {
				if r != ' ' && !unicode.IsPrint(r) {
					t.Fatalf("unprintable %U in %q", r, got)
				}
			}
			if redact != nil && strings.Contains(got, secret) {
				t.Fatalf("secret shown: %q", got)
			}
			if redact == nil && json.Valid([]byte(args)) && !strings.Contains(args, `":`) && strings.Contains(got, `"`) {
				t.Fatalf("a value was shown without a redactor: %q", got)
			}
		}
	})
}

// TestMessageConditional: a call held by a rule's when: tells the person
// asked, before they choose, that the session choice is for the tool,
// whatever its arguments; an unconditional hold and a trust do not.
func TestMessageConditional(t *testing.T) {
	b := &Broker{}
	req := Request{Server: "ev", Tool: "get-sum", Client: "claude-desktop", Rule: "servers.ev.tools.rules[0] (/p/mcpbox.yaml:9:11)",
		Arguments: json.RawMessage(`{"a":1}`), Conditional: true}
	want := "\nFor the session: every later call of ev/get-sum by client claude-desktop's session that needs approval runs without asking, whatever its arguments: the condition (when:) of servers.ev.tools.rules[0] (/p/mcpbox.yaml:9:11) no longer holds one back."
	if got := b.Message(req); !strings.HasSuffix(got, want) {
		t.Errorf("Message = %q, want it to end %q", got, want)
	}
	for name, r := range map[string]Request{
		"unconditional": {Server: "ev", Tool: "get-sum", Rule: "servers.ev.tools.approve"},
		"trust":         {Kind: KindTrust, Server: "ev", Tool: "get-sum", Conditional: true},
	} {
		if got := b.Message(r); strings.Contains(got, "whatever its arguments") {
			t.Errorf("%s: Message = %q", name, got)
		}
	}
}
