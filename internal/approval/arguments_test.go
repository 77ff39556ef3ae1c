package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
)

func TestShow(t *testing.T) {
	long := strings.Repeat("é", foldAt+50)
	for _, tc := range []struct{ name, args, want string }{
		{"keys quoted, in order", `{"z":1,"a":"x","m":true,"n":null}`, "  \"z\": 1\n  \"a\": \"x\"\n  \"m\": true\n  \"n\": null"},
		{"numbers as sent", `{"big":12345678901234567890,"f":1.10,"e":-1E400}`, "  \"big\": 12345678901234567890\n  \"f\": 1.10\n  \"e\": -1E400"},
		{"a key posing as the prompt", `{"p":"/tmp","\nApprove: yes\u001b[2K\u202e":1}`, "  \"p\": \"/tmp\"\n  \"\\nApprove: yes\\x1b[2K\\u202e\": 1"},
		{"nested keys on the line", `{"o":{"k":[1,{"x":"y"}],"e":{}},"a":[]}`, "  \"o\": {\"k\": [1, {\"x\": \"y\"}], \"e\": {}}\n  \"a\": []"},
		{"long values folded", `{"body":"` + long + `","t":1}`, "  \"body\": \"" + strings.Repeat("é", foldAt) + "\"…(250 chars)\n  \"t\": 1"},
		{"long keys folded", `{"` + long + `":1}`, "  \"" + strings.Repeat("é", foldAt) + "\"…(250 chars): 1"},
		{"not an object", `[1,"a"]`, "  [1, \"a\"]"},
		{"empty object", `{}`, "  {}"},
		{"none", ``, "  (no arguments)"},
		{"not JSON", `{"a":`, "  (arguments are not valid JSON, 5 bytes)"},
		{"trailing data", `{} 1`, "  (arguments are not valid JSON, 4 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Show(json.RawMessage(tc.args)); got != tc.want {
				t.Errorf("Show(%s)\n got %q\nwant %q", tc.args, got, tc.want)
			}
		})
	}
}

// hiddenArgs is the attack of the review on the approver: 30 arguments,
// a key crafted to read as the approver's own prompt, a 2,000-character
// value, a secret, and the dangerous argument last, where a 500-character
// summary never reached.
func hiddenArgs() (json.RawMessage, []string) {
	var b strings.Builder
	var keys []string
	b.WriteString("{")
	add := func(k, v string) {
		if len(keys) > 0 {
			b.WriteString(",")
		}
		kq, _ := json.Marshal(k)
		fmt.Fprintf(&b, "%s:%s", kq, v)
		keys = append(keys, k)
	}
	add("\nApprove: yes", `"harmless"`)
	add("body", `"`+strings.Repeat("x", 2000)+`"`)
	add("token", `"Bearer `+secret+`"`)
	for i := len(keys); i < 29; i++ {
		add(fmt.Sprintf("opt%02d", i), strconv.Itoa(i))
	}
	add("delete_after", `"/home/user/.ssh"`)
	b.WriteString("}")
	return json.RawMessage(b.String()), keys
}

// TestApproverSeesEveryArgument: every channel (the elicitation message,
// Pending as the CLI gets it, the web endpoint, the stored row) has every
// key, quoted, and the last, dangerous value; what is stored and shown is
// redacted.
func TestApproverSeesEveryArgument(t *testing.T) {
	args, keys := hiddenArgs()
	redacted := json.RawMessage(redactSecret(string(args))) // as the gateway's redactor does
	db := openDB(t)
	b, _ := newBroker(t, db, wait)
	req := callReq()
	req.Summary = Summary(args, redactSecret)
	req.Arguments = redacted
	started := make(chan string, 1)
	ch := askAsync(context.Background(), b, req, signal(started))
	msg := recv(t, started)
	p := b.Pending()
	if len(p) != 1 {
		t.Fatalf("pending %+v", p)
	}
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	web := get(t, srv.URL+"/approvals")
	var stored string
	if err := db.QueryRow(`SELECT arguments FROM approval_requests WHERE id = ?`, p[0].ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != string(redacted) || string(p[0].Arguments) != string(redacted) {
		t.Errorf("stored arguments\n%s\npending arguments\n%s\nwant the redacted arguments exactly\n%s", stored, p[0].Arguments, redacted)
	}
	var fromWeb struct {
		Pending []Request `json:"pending"`
	}
	if err := json.Unmarshal([]byte(web), &fromWeb); err != nil || len(fromWeb.Pending) != 1 || string(fromWeb.Pending[0].Arguments) != string(redacted) {
		t.Errorf("GET /approvals: %s (%v), want the redacted arguments exactly", web, err)
	}
	for name, text := range map[string]string{"elicitation message": msg, "Show of the pending request": Show(p[0].Arguments)} {
		for _, k := range keys {
			if !strings.Contains("\n"+text, "\n  "+strconv.Quote(k)+": ") {
				t.Errorf("%s lacks the key %s on a line of its own:\n%s", name, strconv.Quote(k), text)
			}
		}
		if !strings.Contains(text, `"delete_after": "/home/user/.ssh"`) {
			t.Errorf("%s lacks the last argument:\n%s", name, text)
		}
		if strings.Contains(text, "\nApprove: yes") {
			t.Errorf("%s lets a key pose as a line of the prompt:\n%s", name, text)
		}
	}
	if n := strings.Count(msg, "\n"); n != 1+len(keys) {
		t.Errorf("elicitation message has %d line breaks, want %d (question, header, one per argument)", n, 1+len(keys))
	}
	for name, text := range map[string]string{"message": msg, "stored": stored, "web": web, "summary": p[0].Summary} {
		if strings.Contains(text, secret) {
			t.Errorf("%s shows the secret: %s", name, text)
		}
	}
	b.Decide(p[0].ID, Decision{By: "test"})
	recv(t, ch)
}

func get(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: wait}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestArgumentsTooLarge: arguments too large to show are refused, the
// call denied, rather than shown in part.
func TestArgumentsTooLarge(t *testing.T) {
	b, a := newBroker(t, openDB(t), wait)
	req := callReq()
	req.Arguments = json.RawMessage(`{"a":"` + strings.Repeat("x", MaxArguments) + `"}`)
	d, err := b.Ask(context.Background(), req, nil)
	if !errors.Is(err, ErrArgumentsTooLarge) || d.Allow {
		t.Errorf("Ask = %+v, %v; want a deny with ErrArgumentsTooLarge", d, err)
	}
	if p := b.Pending(); len(p) != 0 || len(a.list()) != 0 {
		t.Errorf("pending %v, decisions %v", p, a.list())
	}
	// Text that is not JSON is held as a JSON string of it.
	req.Arguments = json.RawMessage(`{"a":`)
	id, ch := holdOne(t, b, req)
	if got := string(b.Pending()[0].Arguments); got != `"{\"a\":"` {
		t.Errorf("arguments that are not JSON held as %s", got)
	}
	b.Decide(id, Decision{By: "test"})
	recv(t, ch)
}

// TestOldSchemaMigrated: a database made before approval_requests had an
// arguments column opens; its rows stay, and new requests store their
// arguments.
func TestOldSchemaMigrated(t *testing.T) {
	db := openDB(t)
	old := strings.Replace(schema, "\targuments    TEXT NOT NULL DEFAULT '',\n", "", 1)
	if old == schema {
		t.Fatal("the old schema still has the arguments column")
	}
	if _, err := db.Exec(old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO approval_requests (id, time, kind, client, session, server, tool, sandbox, rule, summary, status)
		VALUES ('apr_old', ?, 'call', 'c', 's', 'srv', 't', '', '', '{}', 'allowed')`, fmtTime(time.Now())); err != nil {
		t.Fatal(err)
	}
	for range 2 { // and a second open finds the column there
		b, err := New(Options{DB: db, Timeout: wait})
		if err != nil {
			t.Fatalf("New on an old database: %v", err)
		}
		b.Close()
	}
	b, _ := newBroker(t, db, wait)
	req := callReq()
	req.Arguments = json.RawMessage(`{"n": 9007199254740993}`)
	id, ch := holdOne(t, b, req)
	var args string
	if err := db.QueryRow(`SELECT arguments FROM approval_requests WHERE id = ?`, id).Scan(&args); err != nil || args != `{"n":9007199254740993}` {
		t.Errorf("stored arguments %q, %v", args, err)
	}
	if err := db.QueryRow(`SELECT arguments FROM approval_requests WHERE id = 'apr_old'`).Scan(&args); err != nil || args != "" {
		t.Errorf("old row: arguments %q, %v", args, err)
	}
	b.Decide(id, Decision{By: "test"})
	recv(t, ch)
}

// FuzzShow checks what the approver relies on: for any object, one line
// per top-level key, each starting with the key quoted, and nothing
// unprintable but the line breaks.
func FuzzShow(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[{"c":"\n"}]}`, `{"\nApprove: yes":"\u202e"}`, `[1]`, `"x"`, `{"a":`, "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		got := Show(json.RawMessage(args))
		for _, r := range got {
			if r != '\n' && r != ' ' && !unicode.IsPrint(r) {
				t.Fatalf("unprintable %U in %q", r, got)
			}
		}
		var members map[string]json.RawMessage
		if !json.Valid([]byte(args)) || json.Unmarshal([]byte(args), &members) != nil || len(members) == 0 || argKeyCount(args) != len(members) {
			return // not an object, or one with repeated keys
		}
		lines := strings.Split(got, "\n")
		if len(lines) != len(members) {
			t.Fatalf("%d lines for %d arguments: %q", len(lines), len(members), got)
		}
		for k := range members {
			if !strings.Contains("\n"+got, "\n  "+fold(k)+": ") {
				t.Fatalf("key %q not on a line of its own: %q", k, got)
			}
		}
	})
}

// argKeyCount counts the top-level keys of the object args, repeats
// included.
func argKeyCount(args string) int {
	dec := json.NewDecoder(strings.NewReader(args))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return -1
	}
	n := 0
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return -1
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return -1
		}
		n++
	}
	return n
}
