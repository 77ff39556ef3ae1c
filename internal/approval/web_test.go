package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type client struct {
	t   *testing.T
	url string
}

func (c client) do(method, path, contentType, body string) (int, map[string]any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		c.t.Fatalf("%s %s: body %q is not JSON: %v", method, path, raw, err)
	}
	return resp.StatusCode, out
}

func (c client) post(path, body string) int {
	c.t.Helper()
	code, _ := c.do("POST", path, "application/json", body)
	return code
}

func TestWebRoundTrip(t *testing.T) {
	b, a := newBroker(t, openDB(t), wait)
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	c := client{t, srv.URL}

	code, body := c.do("GET", "/approvals", "", "")
	if code != 200 || !cmp.Equal(body, map[string]any{"pending": []any{}}) {
		t.Fatalf("empty GET /approvals = %d %v", code, body)
	}

	id, ch := holdOne(t, b, callReq())
	code, body = c.do("GET", "/approvals", "", "")
	pending, _ := body["pending"].([]any)
	if code != 200 || len(pending) != 1 {
		t.Fatalf("GET /approvals = %d %v", code, body)
	}
	first, _ := pending[0].(map[string]any)
	for k, want := range map[string]string{"id": id, "client": "claude-desktop", "server": "github", "tool": "create_pull_request",
		"kind": "call", "rule": "servers.github.tools.approve", "summary": `{repo: "octo/x"}`, "sandbox": "sb1", "session": "s1"} {
		if first[k] != want {
			t.Errorf("pending[0][%q] = %v, want %q", k, first[k], want)
		}
	}

	if code, body := c.do("POST", "/approvals/"+id, "application/json; charset=utf-8", `{"decision":"allow","scope":"always"}`); code != 200 || body["ok"] != true {
		t.Fatalf("POST = %d %v", code, body)
	}
	want := Decision{Allow: true, Scope: ScopeAlways, By: "web"}
	if got := recv(t, ch); got.D != want {
		t.Fatalf("Ask = %+v, want %+v", got.D, want)
	}
	if got := a.list(); len(got) != 1 || got[0].D.By != "web" {
		t.Errorf("audit = %+v", got)
	}
	if code := c.post("/approvals/"+id, `{"decision":"deny"}`); code != 409 {
		t.Errorf("second POST = %d, want 409", code)
	}

	code, body = c.do("GET", "/approvals/remembered", "", "")
	rem, _ := body["remembered"].([]any)
	if code != 200 || len(rem) != 1 || rem[0].(map[string]any)["id"] != id || rem[0].(map[string]any)["scope"] != "always" {
		t.Fatalf("GET /approvals/remembered = %d %v", code, body)
	}
	if code, _ := c.do("DELETE", "/approvals/remembered/"+id, "", ""); code != 200 {
		t.Errorf("DELETE = %d", code)
	}
	if code, _ := c.do("DELETE", "/approvals/remembered/"+id, "", ""); code != 404 {
		t.Errorf("second DELETE = %d, want 404", code)
	}
	if len(b.Remembered()) != 0 {
		t.Errorf("DELETE did not revoke")
	}
}

func TestWebRejects(t *testing.T) {
	b, _ := newBroker(t, openDB(t), wait)
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	c := client{t, srv.URL}
	id, ch := holdOne(t, b, callReq())

	big := `{"decision":"allow","scope":"once"` + strings.Repeat(" ", 70<<10) + `}`
	for _, tc := range []struct {
		name, path, ctype, body string
		want                    int
	}{
		{"unknown id", "/approvals/apr_aaaaaaaaaaaa", "application/json", `{"decision":"allow"}`, 404},
		{"form body", "/approvals/" + id, "application/x-www-form-urlencoded", "decision=allow", 415},
		{"no content type", "/approvals/" + id, "", `{"decision":"allow"}`, 415},
		{"text/plain", "/approvals/" + id, "text/plain", `{"decision":"allow"}`, 415},
		{"not json", "/approvals/" + id, "application/json", `allow`, 400},
		{"empty", "/approvals/" + id, "application/json", ``, 400},
		{"bad decision", "/approvals/" + id, "application/json", `{"decision":"maybe"}`, 400},
		{"no decision", "/approvals/" + id, "application/json", `{"scope":"once"}`, 400},
		{"bad scope", "/approvals/" + id, "application/json", `{"decision":"allow","scope":"forever"}`, 400},
		{"unknown field", "/approvals/" + id, "application/json", `{"decision":"allow","by":"cli:uid=0"}`, 400},
		{"two values", "/approvals/" + id, "application/json", `{"decision":"allow"}{"decision":"deny"}`, 400},
		{"too big", "/approvals/" + id, "application/json", big, 413},
	} {
		code, body := c.do("POST", tc.path, tc.ctype, tc.body)
		if code != tc.want || body["error"] == nil {
			t.Errorf("%s: %d %v, want %d with an error", tc.name, code, body, tc.want)
		}
	}
	if p := b.Pending(); len(p) != 1 {
		t.Fatalf("a rejected POST decided the request: pending %+v", p)
	}
	rec := httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/approvals/"+id, nil))
	if rec.Code != 405 {
		t.Errorf("GET /approvals/ID = %d, want 405", rec.Code)
	}
	if code := c.post("/approvals/"+id, `{"decision":"deny"}`); code != 200 {
		t.Fatalf("deny = %d", code)
	}
	if got := recv(t, ch); got.D.Allow || got.D.By != "web" {
		t.Errorf("Ask = %+v", got.D)
	}
}

// The handler's JSON lists are never null.
func TestWebEmptyLists(t *testing.T) {
	b, _ := newBroker(t, openDB(t), wait)
	rec := httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/approvals/remembered", bytes.NewReader(nil)))
	if got := strings.TrimSpace(rec.Body.String()); got != `{"remembered":[]}` {
		t.Errorf("body %q", got)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

// TestWebCancelledIsGone: the dashboard cannot approve a request whose
// call was cancelled; it is told the request is gone.
func TestWebCancelledIsGone(t *testing.T) {
	b, _ := newBroker(t, openDB(t), wait)
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	c := client{t, srv.URL}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan string, 1)
	ch := askAsync(ctx, b, callReq(), signal(started))
	recv(t, started)
	id := b.Pending()[0].ID
	cancel()
	recv(t, ch)
	if code, body := c.do("POST", "/approvals/"+id, "application/json", `{"decision":"allow"}`); code != http.StatusGone || !strings.Contains(fmt.Sprint(body), "cancelled") {
		t.Fatalf("approving a cancelled request over the web = %d %v, want 410", code, body)
	}
}
