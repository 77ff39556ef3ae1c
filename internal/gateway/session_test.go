package gateway

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mcpbox/internal/approval"
)

// hangingLauncher starts raw servers that never answer tools/call; of
// their tools, approvalHook holds "held" for approval.
func hangingLauncher(t *testing.T) (func(context.Context, Scope) (*Process, error), func() []*rawServer) {
	return rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"hang","inputSchema":{"type":"object"}},{"name":"held","inputSchema":{"type":"object"}}]}`)
		}
	})
}

// waitFor polls cond for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// receivedAll counts the messages of method that servers received.
func receivedAll(servers []*rawServer, method string) int {
	n := 0
	for _, s := range servers {
		n += len(s.received(method))
	}
	return n
}

// httpClient speaks Streamable HTTP by hand, so that a test decides when
// a request is sent and abandoned.
type httpClient struct {
	t     *testing.T
	url   string
	token string
}

func (c httpClient) do(ctx context.Context, method, session string, body any) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// initialize opens a session; it returns its id ("" if refused) and the
// response body.
func (c httpClient) initialize(ctx context.Context) (string, string) {
	resp, body, err := c.do(ctx, http.MethodPost, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	if err != nil {
		return "", err.Error()
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"result"`) {
		return "", string(body)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if _, _, err := c.do(ctx, http.MethodPost, sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		return "", err.Error()
	}
	return sid, string(body)
}

// mustInitialize is initialize that fails the test without a session.
func (c httpClient) mustInitialize(t *testing.T, ctx context.Context) string {
	t.Helper()
	sid, body := c.initialize(ctx)
	if sid == "" {
		t.Fatalf("initialize: %s", body)
	}
	return sid
}

// callAsync starts a tools/call of the session and returns its answer body.
func (c httpClient) callAsync(ctx context.Context, sid, tool string) <-chan string {
	ch := make(chan string, 1)
	go func() {
		_, body, err := c.do(ctx, http.MethodPost, sid, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
			"params": map[string]any{"name": tool, "arguments": map[string]any{}}})
		if err != nil {
			ch <- err.Error()
			return
		}
		ch <- string(body)
	}()
	return ch
}

// deleteSession sends a DELETE and returns how long it took.
func (c httpClient) deleteSession(sid string) (int, time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	resp, _, err := c.do(ctx, http.MethodDelete, sid, nil)
	if err != nil {
		c.t.Fatalf("DELETE %s: %v (after %v)", sid, err, time.Since(start))
	}
	return resp.StatusCode, time.Since(start)
}

const testToken = "0123456789abcdef-token"

func newHTTPGateway(t *testing.T, srv *Server, opts Options, o HTTPOptions) (*Gateway, httpClient) {
	t.Helper()
	gw, err := New([]*Server{srv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	o.Clients = []Client{{Name: "alice", Token: []byte(testToken)}}
	return gw, httpClient{t: t, url: serveHTTP(t, gw, o), token: testToken}
}

// TestSessionCapUnderRace attacks the per-client session cap with 90
// concurrent initializes of one token: exactly MaxSessions (64) are
// accepted, the rest refused with a clear error, and no server starts for
// a refused one.
func TestSessionCapUnderRace(t *testing.T) {
	var starts atomic.Int32
	launch, _ := hangingLauncher(t)
	slow := func(ctx context.Context, s Scope) (*Process, error) {
		starts.Add(1)
		time.Sleep(50 * time.Millisecond) // a sandbox takes a while: widen the race
		return launch(ctx, s)
	}
	_, c := newHTTPGateway(t, &Server{Name: "s", Scope: ScopeSession, Launch: slow, Allow: []string{"*"}}, Options{}, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 90
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted int
	var refusals []string
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			sid, body := c.initialize(ctx)
			mu.Lock()
			defer mu.Unlock()
			if sid != "" {
				accepted++
			} else {
				refusals = append(refusals, body)
			}
		})
	}
	close(start)
	wg.Wait()
	if accepted != 64 || len(refusals) != n-64 {
		t.Fatalf("%d accepted, %d refused; want 64 and %d", accepted, len(refusals), n-64)
	}
	for _, r := range refusals {
		if !strings.Contains(r, "too many open sessions for this client") {
			t.Fatalf("refusal %q does not say why", r)
		}
	}
	if got := starts.Load(); got != int32(accepted) {
		t.Errorf("%d servers started for %d accepted sessions", got, accepted)
	}
}

// TestDeleteCancelsCall: a DELETE during a hanging call returns at once,
// the server is told notifications/cancelled, and the call is answered.
func TestDeleteCancelsCall(t *testing.T) {
	launch, started := hangingLauncher(t)
	_, c := newHTTPGateway(t, &Server{Name: "s", Launch: launch, Allow: []string{"*"}}, Options{}, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := c.mustInitialize(t, ctx)
	answer := c.callAsync(ctx, sid, "hang")
	waitFor(t, 10*time.Second, "the call reaching the server", func() bool { return receivedAll(started(), "tools/call") == 1 })
	status, took := c.deleteSession(sid)
	if status != http.StatusNoContent || took > 2*time.Second {
		t.Fatalf("DELETE = %d after %v, want 204 at once", status, took)
	}
	waitFor(t, 5*time.Second, "notifications/cancelled upstream", func() bool {
		return receivedAll(started(), "notifications/cancelled") == 1
	})
	select {
	case body := <-answer:
		if !strings.Contains(body, ErrSessionEnded.Error()) {
			t.Errorf("the call was answered %q, want %q", body, ErrSessionEnded)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call's request did not end after DELETE")
	}
}

// approvalHook holds calls of "held" in a real approval broker, as the
// guard does, and counts those that ran.
func approvalHook(t *testing.T) (*approval.Broker, Hooks, *atomic.Int32) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b, err := approval.New(approval.Options{DB: db, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	var ran atomic.Int32
	hooks := Hooks{Call: func(ctx context.Context, c *Call, next func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
		if c.Tool != "held" {
			return next(ctx)
		}
		d, err := b.Ask(ctx, approval.Request{Client: c.Agent, Session: c.Session, Server: c.Server, Tool: c.Tool}, nil)
		if err != nil || !d.Allow {
			return json.RawMessage(`{"content":[],"isError":true}`), nil
		}
		ran.Add(1)
		return next(ctx)
	}}
	return b, hooks, &ran
}

// TestDeleteWithdrawsApproval attacks an approval that outlives its
// session: a DELETE while the call waits for approval returns at once,
// the request leaves the pending list, and approving it later fails and
// runs nothing.
func TestDeleteWithdrawsApproval(t *testing.T) {
	launch, started := hangingLauncher(t)
	b, hooks, ran := approvalHook(t)
	_, c := newHTTPGateway(t, &Server{Name: "s", Launch: launch, Allow: []string{"*"}}, Options{Hooks: hooks}, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := c.mustInitialize(t, ctx)
	c.callAsync(ctx, sid, "held")
	waitFor(t, 10*time.Second, "the call waiting for approval", func() bool { return len(b.Pending()) == 1 })
	id := b.Pending()[0].ID
	status, took := c.deleteSession(sid)
	if status != http.StatusNoContent || took > 2*time.Second {
		t.Fatalf("DELETE = %d after %v, want 204 at once", status, took)
	}
	if p := b.Pending(); len(p) != 0 {
		t.Fatalf("still pending after DELETE: %+v", p)
	}
	err := b.Decide(id, approval.Decision{Allow: true, By: "test"})
	if !errors.Is(err, approval.ErrCancelled) || !strings.Contains(err.Error(), ErrSessionEnded.Error()) {
		t.Fatalf("approving after DELETE = %v, want %v (%v)", err, approval.ErrCancelled, ErrSessionEnded)
	}
	time.Sleep(100 * time.Millisecond)
	if ran.Load() != 0 || receivedAll(started(), "tools/call") != 0 {
		t.Fatalf("the call ran for a deleted session")
	}
}

// TestSessionCapRecovers: 64 sessions each with a hanging call, all
// deleted, leave room for new sessions.
func TestSessionCapRecovers(t *testing.T) {
	launch, started := hangingLauncher(t)
	_, c := newHTTPGateway(t, &Server{Name: "s", Launch: launch, Allow: []string{"*"}}, Options{}, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var sids []string
	for range 64 {
		sid, body := c.initialize(ctx)
		if sid == "" {
			t.Fatalf("initialize %d: %s", len(sids), body)
		}
		sids = append(sids, sid)
		c.callAsync(ctx, sid, "hang")
	}
	waitFor(t, 20*time.Second, "64 calls hanging", func() bool { return receivedAll(started(), "tools/call") == 64 })
	if sid, body := c.initialize(ctx); sid != "" || !strings.Contains(body, "too many open sessions") {
		t.Fatalf("a 65th session: %q %s", sid, body)
	}
	for _, sid := range sids {
		if status, took := c.deleteSession(sid); status != http.StatusNoContent || took > 2*time.Second {
			t.Fatalf("DELETE = %d after %v", status, took)
		}
	}
	if sid, body := c.initialize(ctx); sid == "" {
		t.Fatalf("no new session after deleting all: %s", body)
	}
}

// TestIdleCloseCancelsCall: a client that abandons its hanging call and
// goes quiet has the session closed after SessionIdle, its call cancelled
// upstream and its slot freed.
func TestIdleCloseCancelsCall(t *testing.T) {
	launch, started := hangingLauncher(t)
	gw, c := newHTTPGateway(t, &Server{Name: "s", Launch: launch, Allow: []string{"*"}}, Options{MaxSessions: 1},
		HTTPOptions{SessionIdle: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sid := c.mustInitialize(t, ctx)
	callCtx, abandon := context.WithCancel(ctx)
	answer := c.callAsync(callCtx, sid, "hang")
	waitFor(t, 10*time.Second, "the call reaching the server", func() bool { return receivedAll(started(), "tools/call") == 1 })
	abandon()
	<-answer
	waitFor(t, 5*time.Second, "notifications/cancelled upstream", func() bool {
		return receivedAll(started(), "notifications/cancelled") == 1
	})
	waitFor(t, 5*time.Second, "the idle session closing", func() bool {
		gw.mu.Lock()
		defer gw.mu.Unlock()
		return len(gw.sessions) == 0
	})
	if sid, body := c.initialize(ctx); sid == "" {
		t.Fatalf("no new session after the idle one closed: %s", body)
	}
}

// TestCloseCancelsWaitingCalls: closing the gateway with one call hanging
// upstream and one waiting for approval returns promptly; both are
// answered, the approval withdrawn with the shutdown as its reason.
func TestCloseCancelsWaitingCalls(t *testing.T) {
	launch, started := hangingLauncher(t)
	b, hooks, _ := approvalHook(t)
	gw, c := newHTTPGateway(t, &Server{Name: "s", Launch: launch, Allow: []string{"*"}}, Options{Hooks: hooks}, HTTPOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var answers []<-chan string
	for _, tool := range []string{"held", "hang"} {
		sid, body := c.initialize(ctx)
		if sid == "" {
			t.Fatalf("initialize: %s", body)
		}
		answers = append(answers, c.callAsync(ctx, sid, tool))
	}
	waitFor(t, 10*time.Second, "a call waiting for approval", func() bool { return len(b.Pending()) == 1 })
	id := b.Pending()[0].ID
	waitFor(t, 10*time.Second, "a call reaching the server", func() bool { return receivedAll(started(), "tools/call") == 1 })

	closed := make(chan struct{})
	go func() {
		gw.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return within 2s with calls hanging")
	}
	for i, ch := range answers {
		select {
		case body := <-ch:
			if want := []string{`"isError":true`, ErrShutdown.Error()}[i]; !strings.Contains(body, want) {
				t.Errorf("call %d was answered %q, want %q in it", i, body, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d was not answered", i)
		}
	}
	err := b.Decide(id, approval.Decision{Allow: true, By: "test"})
	if !errors.Is(err, approval.ErrCancelled) || !strings.Contains(err.Error(), ErrShutdown.Error()) {
		t.Fatalf("approving after Close = %v, want %v (%v)", err, approval.ErrCancelled, ErrShutdown)
	}
}

// TestStdioHangUpCancelsCall: a stdio client that closes its input during
// a hanging call, and still reads, keeps its session until the answer (a
// script that pipes its requests in); once it hangs up, closing its
// output too, the session ends at once and the server is told
// notifications/cancelled. (The SDK cancels the requests of a connection
// whose reader ended; the gateway waits for them first, inFlight.drain.)
func TestStdioHangUpCancelsCall(t *testing.T) {
	launch, started := hangingLauncher(t)
	gw, err := New([]*Server{{Name: "s", Launch: launch, Allow: []string{"*"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
	}()
	go io.Copy(io.Discard, outR)
	served := make(chan error, 1)
	go func() { served <- gw.ServeStdio(context.Background(), LocalAgent, inR, outW) }()
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{}}}`,
	} {
		if _, err := inW.Write([]byte(m + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the call reaching the server", func() bool { return receivedAll(started(), "tools/call") == 1 })
	inW.Close()
	select {
	case <-served:
		t.Fatal("ServeStdio returned at the end of the input, with a call in flight and the client still reading")
	case <-time.After(3 * gonePoll):
	}
	outR.Close()
	select {
	case <-served:
	case <-time.After(2 * time.Second):
		t.Fatal("ServeStdio did not return within 2s of the client hanging up")
	}
	waitFor(t, 5*time.Second, "notifications/cancelled upstream", func() bool {
		return receivedAll(started(), "notifications/cancelled") == 1
	})
}

// TestStdioShutdownAnswersCall: the end of ServeStdio's context (serve's
// signal) during a hanging call returns at once, and the client is
// answered that the gateway is shutting down.
func TestStdioShutdownAnswersCall(t *testing.T) {
	launch, started := hangingLauncher(t)
	gw, err := New([]*Server{{Name: "s", Launch: launch, Allow: []string{"*"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	defer outR.Close()
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(outR)
		out <- string(b)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- gw.ServeStdio(ctx, LocalAgent, inR, outW)
		outW.Close()
	}()
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{}}}`,
	} {
		if _, err := inW.Write([]byte(m + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the call reaching the server", func() bool { return receivedAll(started(), "tools/call") == 1 })
	cancel()
	select {
	case <-served:
	case <-time.After(2 * time.Second):
		t.Fatal("ServeStdio did not return within 2s of its context ending")
	}
	select {
	case got := <-out:
		want := `{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"` + ErrShutdown.Error() + `"}}`
		if !strings.Contains(got, want) {
			t.Fatalf("the client read %q, want call 2 answered with %s (code -32000, not 0)", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the output did not end")
	}
}

// TestHangUpDuringInitialize: a client that hangs up while its session's
// servers are still starting leaves nothing behind: the session's
// instance is stopped once its start completes, not attached to a session
// that has ended.
func TestHangUpDuringInitialize(t *testing.T) {
	base, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[]}`)
		}
	})
	launching := make(chan struct{}, 1)
	slow := func(ctx context.Context, scope Scope) (*Process, error) {
		launching <- struct{}{}
		// A start that does not heed ctx (a sandbox's setup step).
		time.Sleep(time.Second)
		return base(ctx, scope)
	}
	gw := newGateway(t, &Server{Name: "raw", Launch: slow, Allow: []string{"*"}, Scope: ScopeSession})
	cInR, cInW := io.Pipe()
	cOutR, cOutW := io.Pipe()
	go io.Copy(io.Discard, cOutR)
	served := make(chan error, 1)
	go func() { served <- gw.ServeStdio(context.Background(), LocalAgent, cInR, cOutW) }()
	io.WriteString(cInW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	select {
	case <-launching:
	case <-time.After(10 * time.Second):
		t.Fatal("the server was not launched")
	}
	cInW.Close() // the client hangs up mid-start
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return after the client hung up")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ss := started()
		gone := len(ss) == 1
		for _, s := range ss {
			select {
			case <-s.done:
			default:
				gone = false
			}
		}
		if gone && len(gw.Instances()) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the hang-up: %d processes started, instances %+v; want the one stopped and none left", len(ss), gw.Instances())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
