package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// callUntilBack calls tool t until the server answers, for at most 10 s;
// every error meanwhile must be the restart error naming the server.
func callUntilBack(t *testing.T, c *rawClient) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, _ := c.call("tools/call", map[string]any{"name": "t"})
		e, _ := resp["error"].(map[string]any)
		if e == nil {
			return resp
		}
		if msg := fmt.Sprint(e["message"]); !strings.Contains(msg, "server raw is restarting after") {
			t.Fatalf("a call during the restart: %v, want the restart error", resp)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come back within 10s: %v", resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRestartErrorSaysWhat: a call in flight when its server exits is
// told which server ended, how, and which restart follows; a call during
// a short restart delay waits it out, one during a long delay is refused
// at once saying when to try again; the call after the restart runs, and
// Hooks.Restart and Instances report the restarts.
func TestRestartErrorSaysWhat(t *testing.T) {
	const crashes = 4 // the fourth restart waits 2s, over restartWaitMax
	var calls atomic.Int32
	raw, started := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			if calls.Add(1) <= crashes {
				s.out.Close() // dies without answering
				return
			}
			s.reply(msg, `{"content":[{"type":"text","text":"back"}]}`)
		}
	})
	launch := func(ctx context.Context, sc Scope) (*Process, error) {
		p, err := raw(ctx, sc)
		if p != nil {
			p.Describe = func() string { return "exited with status 1" }
			p.Clean = func() bool { return false }
		}
		return p, err
	}
	var mu sync.Mutex
	var events []RestartEvent
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartOnFailure}},
		Options{Version: "test", Hooks: Hooks{Restart: func(ev RestartEvent) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	c := newRawClient(t, gw)

	for i := 1; i <= crashes; i++ {
		// Calls 2..4 wait out the delay before them (up to 1s).
		resp, _ := c.call("tools/call", map[string]any{"name": "t"})
		e, _ := resp["error"].(map[string]any)
		want := fmt.Sprintf("server raw is restarting after it exited with status 1 (restart %d of %d)", i, crashLoopMax)
		if e == nil || e["code"].(float64) != codeUnavailable || !strings.Contains(fmt.Sprint(e["message"]), want) {
			t.Fatalf("call %d, which a crash ended: %v, want error %q", i, resp, want)
		}
	}
	if n := len(started()); n != crashes {
		t.Fatalf("started %d servers for %d calls, want one each (the short delays waited out)", n, crashes)
	}
	// The fourth restart waits 2s: a call now is told so at once.
	start := time.Now()
	resp, _ := c.call("tools/call", map[string]any{"name": "t"})
	e, _ := resp["error"].(map[string]any)
	want := fmt.Sprintf("server raw is restarting after it exited with status 1 (restart %d of %d); try again in ", crashes, crashLoopMax)
	if e == nil || !strings.Contains(fmt.Sprint(e["message"]), want) {
		t.Fatalf("a call during the long restart delay: %v, want %q", resp, want)
	}
	if d := time.Since(start); d > restartWaitMax {
		t.Errorf("the refusal took %v, want it at once", d)
	}
	if ins := gw.Instances(); len(ins) != 1 || ins[0].State != StateRestarting || !strings.Contains(ins[0].Reason, want) {
		t.Errorf("instances during the delay: %+v, want one restarting", ins)
	}
	if resp := callUntilBack(t, c); !strings.Contains(fmt.Sprint(resp["result"]), "back") {
		t.Fatalf("after the restart: %v", resp)
	}
	mu.Lock()
	got := append([]RestartEvent(nil), events...)
	mu.Unlock()
	if len(got) != crashes {
		t.Fatalf("restart events: %+v, want %d", got, crashes)
	}
	for i, ev := range got {
		if ev.GaveUp || ev.Restart != i+1 || ev.Max != crashLoopMax || ev.Reason != "exited with status 1" || ev.Server != "raw" {
			t.Errorf("restart event %d: %+v, want restart %d of %d after exited with status 1", i+1, ev, i+1, crashLoopMax)
		}
	}
	ins := gw.Instances()
	if len(ins) != 1 || ins[0].Restarts != crashes || ins[0].State != StateRunning {
		t.Fatalf("instances: %+v, want one running after %d restarts", ins, crashes)
	}
}

// TestGiveUpLapses: a server given up on after a crash loop (here: its
// sandbox cannot start, as with a full output dir) is started afresh by
// the first request once giveUpFor has passed, so that mending the cause
// needs no serve restart; before that, requests are refused without a
// start.
func TestGiveUpLapses(t *testing.T) {
	old := giveUpFor
	giveUpFor = 300 * time.Millisecond
	t.Cleanup(func() { giveUpFor = old })
	var mended atomic.Bool
	raw, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			if !mended.Load() {
				s.out.Close() // dies without answering
				return
			}
			s.reply(msg, `{"content":[{"type":"text","text":"back"}]}`)
		}
	})
	// The first start works (the session's); every later one fails until
	// the cause is mended.
	var launches atomic.Int32
	launch := func(ctx context.Context, sc Scope) (*Process, error) {
		if launches.Add(1) > 1 && !mended.Load() {
			return nil, errors.New("its output dir is full")
		}
		return raw(ctx, sc)
	}
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartOnFailure}}, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	c := newRawClient(t, gw)
	refusal := func() string {
		resp, _ := c.call("tools/call", map[string]any{"name": "t"})
		e, _ := resp["error"].(map[string]any)
		return fmt.Sprint(e["message"])
	}
	for attempt := 0; ; attempt++ {
		if attempt == 40 {
			t.Fatal("not given up on after 40 calls")
		}
		msg := refusal()
		if strings.Contains(msg, "giving up on it for 300ms") {
			break
		}
		if _, wait, ok := strings.Cut(msg, "try again in "); ok {
			d, err := time.ParseDuration(strings.Fields(wait)[0])
			if err != nil || d > 10*time.Second {
				t.Fatalf("refusal %q: want a short delay", msg)
			}
			time.Sleep(d)
		}
	}
	n := launches.Load()
	if msg := refusal(); !strings.Contains(msg, "giving up") || launches.Load() != n {
		t.Fatalf("a call right after the give-up: %q, %d launches (before: %d); want the refusal and no start", msg, launches.Load(), n)
	}
	if ins := gw.Instances(); len(ins) != 1 || ins[0].State != StateFailed {
		t.Fatalf("instances after the give-up: %+v, want one failed", ins)
	}
	mended.Store(true)
	time.Sleep(giveUpFor + 50*time.Millisecond)
	resp, _ := c.call("tools/call", map[string]any{"name": "t"})
	if !strings.Contains(fmt.Sprint(resp["result"]), "back") || launches.Load() != n+1 {
		t.Fatalf("a call after the give-up lapsed: %v (%d launches, want %d)", resp, launches.Load(), n+1)
	}
	if ins := gw.Instances(); len(ins) != 1 || ins[0].State != StateRunning {
		t.Fatalf("instances after the lapse: %+v, want one running", ins)
	}
}

// TestNoRestartSaysSo: with restart off the error says the server ended
// and that restart is off, and the hook hears that it gave up.
func TestNoRestartSaysSo(t *testing.T) {
	raw, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			s.out.Close()
		}
	})
	launch := func(ctx context.Context, sc Scope) (*Process, error) {
		p, err := raw(ctx, sc)
		if p != nil {
			p.Describe = func() string { return "exited with status 3" }
		}
		return p, err
	}
	var gaveUp atomic.Bool
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartNo}},
		Options{Version: "test", Hooks: Hooks{Restart: func(ev RestartEvent) { gaveUp.Store(ev.GaveUp) }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	c := newRawClient(t, gw)
	for i := range 2 {
		resp, _ := c.call("tools/call", map[string]any{"name": "t"})
		e, _ := resp["error"].(map[string]any)
		msg := fmt.Sprint(e["message"])
		if e == nil || !strings.Contains(msg, "server raw exited with status 3; restart is off") {
			t.Fatalf("call %d: %v, want the end and that restart is off", i+1, resp)
		}
	}
	if !gaveUp.Load() {
		t.Fatal("Hooks.Restart did not hear that the gateway gave up")
	}
	if ins := gw.Instances(); len(ins) != 1 || ins[0].State != StateFailed {
		t.Fatalf("instances: %+v, want one failed", ins)
	}
}

func TestEndReason(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("exited with status 1"), "exited with status 1"},
		{fmt.Errorf("killed: out of memory"), "killed: out of memory"},
		{fmt.Errorf("failed to start: starting server x: no such file"), "failed to start: starting server x: no such file"},
		{fmt.Errorf("EOF"), "ended (EOF)"},
		{nil, "ended"},
	} {
		if got := endReason(tt.err); got != tt.want {
			t.Errorf("endReason(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestRestartErrorText(t *testing.T) {
	e := &RestartError{Server: "github", Reason: "exited with status 1", Restart: 2, Max: 5, RetryAfter: 1500 * time.Millisecond}
	want := "server github is restarting after it exited with status 1 (restart 2 of 5); try again in 2s"
	if e.Error() != want {
		t.Fatalf("got %q, want %q", e.Error(), want)
	}
}

// TestStartCrashSaysHow: a server that exits before it answers
// initialize (a bad config, a missing module) is reported with how it
// ended, not only "initialize: server connection ended: EOF".
func TestStartCrashSaysHow(t *testing.T) {
	msg := startCrashMessage(t, func(inR *io.PipeReader, outW *io.PipeWriter) {
		go func() {
			// Reads initialize, then exits without answering.
			_, _ = bufio.NewReader(inR).ReadBytes('\n')
			outW.Close()
		}()
	})
	want := "no server could start: server raw: exited with status 3 before it answered (initialize: server connection ended: EOF)"
	if !strings.Contains(msg, want) {
		t.Fatalf("initialize error %q, want %q", msg, want)
	}
}

// TestStartCrashBeforeReadSaysHow: a server that exits before it reads
// initialize fails the gateway's write first (a closed pipe), while the
// end of its output comes a moment later; the error still says how it
// ended, not only "broken pipe" (this raced in CI).
func TestStartCrashBeforeReadSaysHow(t *testing.T) {
	msg := startCrashMessage(t, func(inR *io.PipeReader, outW *io.PipeWriter) {
		inR.Close() // gone before it reads: the write fails
		go func() {
			time.Sleep(50 * time.Millisecond) // its output ends later
			outW.Close()
		}()
	})
	want := "no server could start: server raw: exited with status 3 before it answered"
	if !strings.Contains(msg, want) {
		t.Fatalf("initialize error %q, want %q", msg, want)
	}
}

// startCrashMessage starts a gateway whose one server ("raw", exited
// with status 3 by its Describe) behaves as crash makes it with its
// stdin and stdout, and returns the message of the error a client's
// initialize gets.
func startCrashMessage(t *testing.T, crash func(inR *io.PipeReader, outW *io.PipeWriter)) string {
	t.Helper()
	launch := func(ctx context.Context, sc Scope) (*Process, error) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		crash(inR, outW)
		return &Process{
			Stdin: inW, Stdout: outR,
			Stop:     func() { inW.Close(); inR.Close(); outR.Close() },
			Describe: func() string { return "exited with status 3" },
		}, nil
	}
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartNo}}, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	c := newRawClient(t, gw)
	e, _ := c.init["error"].(map[string]any)
	if e == nil {
		t.Fatalf("initialize: %v, want an error", c.init)
	}
	return fmt.Sprint(e["message"])
}

// unreachableConn is a remote server's connection whose every request
// fails in the transport, as the go-sdk reports a DNS failure.
type unreachableConn struct{ closed chan struct{} }

func (c *unreachableConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *unreachableConn) Write(context.Context, jsonrpc.Message) error {
	// As the go-sdk wraps http.Client.Do's error.
	return fmt.Errorf("sending \"initialize\": %w: %w", &jsonrpc.Error{Code: codeRejected, Message: "rejected by transport"},
		&url.Error{Op: "Post", URL: "https://mcp.example.com/mcp", Err: errors.New("dial tcp: lookup mcp.example.com: no such host")})
}

func (c *unreachableConn) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return nil
}

func (c *unreachableConn) SessionID() string { return "" }

// TestUnreachableRemoteTriedOnce: a remote server that cannot be reached
// is connected to once per start, and its error says so; it is not taken
// for a server that refused initialize (which is then asked
// server/discover on a fresh connection, and initialize again).
func TestUnreachableRemoteTriedOnce(t *testing.T) {
	var launches atomic.Int32
	launch := func(ctx context.Context, sc Scope) (*Process, error) {
		launches.Add(1)
		return &Process{Conn: &unreachableConn{closed: make(chan struct{})}}, nil
	}
	gw, err := New([]*Server{{Name: "remote", Launch: launch, Allow: []string{"*"}, Restart: RestartNo}}, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	c := newRawClient(t, gw)
	e, _ := c.init["error"].(map[string]any)
	if e == nil || !strings.Contains(fmt.Sprint(e["message"]), "no such host") {
		t.Fatalf("initialize: %v, want the transport error", c.init)
	}
	if n := launches.Load(); n != 1 {
		t.Fatalf("the unreachable server was connected to %d times for one start, want 1", n)
	}
}

// beside serves bad beside a server that starts, and returns the gateway
// and a function that opens a session, says how long its initialize
// took, and calls a tool of bad (its prefix + "x"), returning the error's
// message.
func beside(t *testing.T, bad *Server) (*Gateway, func() (time.Duration, string)) {
	t.Helper()
	ok, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
		}
	})
	gw, err := New([]*Server{{Name: "ok", Prefix: "ok_", Launch: ok, Allow: []string{"*"}}, bad}, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw, func() (time.Duration, string) {
		t.Helper()
		begin := time.Now()
		c := newRawClient(t, gw)
		took := time.Since(begin)
		if c.init["result"] == nil {
			t.Fatalf("initialize with one good server: %v", c.init)
		}
		resp, _ := c.call("tools/call", map[string]any{"name": bad.Prefix + "x"})
		e, _ := resp["error"].(map[string]any)
		return took, fmt.Sprint(e["message"])
	}
}

// muteLauncher starts a server that reads and never answers, counting
// its starts in hung.
func muteLauncher(hung *atomic.Int32) func(context.Context, Scope) (*Process, error) {
	return func(ctx context.Context, _ Scope) (*Process, error) {
		hung.Add(1)
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan struct{})
		go func() { // reads, never answers
			defer close(done)
			io.Copy(io.Discard, inR)
			outW.Close()
		}()
		return &Process{Stdin: inW, Stdout: outR, Stop: func() {
			inW.Close()
			outR.Close()
			<-done
		}}, nil
	}
}

// TestUnansweredStartGivesUp: a server that starts but never answers
// initialize holds a session's initialize for startTimeout; after hangMax
// such starts in a row it is given up on, so the next sessions go on
// without it at once and a call to its tool says why. After the give-up
// lapses, one more unanswered start gives up again.
func TestUnansweredStartGivesUp(t *testing.T) {
	oldStart, oldGiveUp := startTimeout, giveUpFor
	startTimeout, giveUpFor = time.Second, 2*time.Second
	t.Cleanup(func() { startTimeout, giveUpFor = oldStart, oldGiveUp })
	var hung atomic.Int32
	gw, session := beside(t, &Server{Name: "mute", Prefix: "mute_", Launch: muteLauncher(&hung), Allow: []string{"*"}, Restart: RestartOnFailure})
	for i := 1; i <= hangMax; i++ {
		took, msg := session()
		if took < startTimeout || !strings.Contains(msg, "did not answer initialize within 1s") {
			t.Fatalf("session %d: initialize took %v, the call said %q; want a wait of %v and the reason", i, took, msg, startTimeout)
		}
	}
	if n := hung.Load(); n != hangMax {
		t.Fatalf("%d starts of the mute server, want %d", n, hangMax)
	}
	took, msg := session()
	want := fmt.Sprintf("did not answer initialize within 1s, %d times in a row; giving up on it for 2s", hangMax)
	if took >= startTimeout || !strings.Contains(msg, want) || hung.Load() != hangMax {
		t.Fatalf("the session after the give-up: initialize took %v, the call said %q, %d starts; want it at once, %q, no start", took, msg, hung.Load(), want)
	}
	if ins := gw.Instances(); !slices.ContainsFunc(ins, func(in Instance) bool { return in.Server == "mute" && in.State == StateFailed }) {
		t.Errorf("instances after the give-up: %+v, want mute failed", ins)
	}
	time.Sleep(giveUpFor + 50*time.Millisecond)
	if _, msg := session(); !strings.Contains(msg, "did not answer initialize") || hung.Load() != hangMax+1 {
		t.Fatalf("after the lapse: %q, %d starts; want one more start", msg, hung.Load())
	}
	if took, msg := session(); took >= startTimeout || !strings.Contains(msg, "giving up") || hung.Load() != hangMax+1 {
		t.Fatalf("after one more unanswered start: initialize took %v, the call said %q, %d starts; want the give-up at once", took, msg, hung.Load())
	}
}

// TestSlowFailingStartGivesUp: a start that fails only after slowFail (a
// secret's pipe nobody writes) holds each session's initialize that long;
// after hangMax of them in a row the server is given up on, so the next
// session goes on without it at once, and a call to its tool says why
// and how the last start failed.
func TestSlowFailingStartGivesUp(t *testing.T) {
	oldSlow, oldGiveUp := slowFail, giveUpFor
	slowFail, giveUpFor = 300*time.Millisecond, time.Minute
	t.Cleanup(func() { slowFail, giveUpFor = oldSlow, oldGiveUp })
	var starts atomic.Int32
	slow := func(ctx context.Context, _ Scope) (*Process, error) {
		starts.Add(1)
		select {
		case <-time.After(slowFail):
			return nil, errors.New("secret TOKEN: no program wrote it to its end within 300ms")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	_, session := beside(t, &Server{Name: "slow", Prefix: "slow_", Launch: slow, Allow: []string{"*"}})
	for i := 1; i <= hangMax; i++ {
		if took, _ := session(); took < slowFail {
			t.Fatalf("session %d: initialize took %v, want the slow start's %v", i, took, slowFail)
		}
	}
	took, msg := session()
	want := fmt.Sprintf("failed to start only after 300ms or more, %d times in a row; giving up on it for 1m0s", hangMax)
	if took >= slowFail || !strings.Contains(msg, want) || !strings.Contains(msg, "no program wrote it") || starts.Load() != hangMax {
		t.Fatalf("the session after %d slow failures: initialize took %v, the call said %q, %d starts; want it at once, %q and the last error, no start",
			hangMax, took, msg, starts.Load(), want)
	}
}

// TestServerStartTimeout: a server's own StartTimeout bounds its start
// in place of startTimeout (a pod whose image is pulled takes longer
// than a local sandbox); without it, the same start is cut off.
func TestServerStartTimeout(t *testing.T) {
	old := startTimeout
	startTimeout = 500 * time.Millisecond
	t.Cleanup(func() { startTimeout = old })
	ok, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			s.reply(msg, `{"tools":[{"name":"x","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			s.reply(msg, `{"content":[{"type":"text","text":"started"}]}`)
		}
	})
	slow := func(ctx context.Context, sc Scope) (*Process, error) {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return ok(ctx, sc)
	}
	for _, tt := range []struct {
		start time.Duration
		want  string
	}{{0, "deadline exceeded"}, {5 * time.Second, `"text":"started"`}} {
		gw, err := New([]*Server{{Name: "pod", Prefix: "pod_", Launch: slow, Allow: []string{"*"}, StartTimeout: tt.start}}, Options{Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gw.Close() })
		c := newRawClient(t, gw)
		_, raw := c.call("tools/call", map[string]any{"name": "pod_x"})
		if got := fmt.Sprintf("%v %s", c.init, raw); !strings.Contains(got, tt.want) {
			t.Errorf("StartTimeout %v: initialize and the call answered %s, want %q in it", tt.start, got, tt.want)
		}
	}
}

// TestNotSetUpIsNoCrash: a start that a server not set up refuses
// (NotSetUp: its package did not install) is no crash: the restart hook
// does not hear of it, no restart delay or give-up follows however often
// it is tried, the client sees why, and the first start once it is set
// up runs it.
func TestNotSetUpIsNoCrash(t *testing.T) {
	raw, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			s.reply(msg, `{"content":[{"type":"text","text":"installed"}]}`)
		}
	})
	var setUp atomic.Bool
	var launches atomic.Int32
	launch := func(ctx context.Context, sc Scope) (*Process, error) {
		launches.Add(1)
		if !setUp.Load() {
			return nil, NotSetUp(errors.New("unavailable: its package did not install"))
		}
		return raw(ctx, sc)
	}
	var restarts atomic.Int32
	ok, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {}) // so that the session opens
	gw, err := New([]*Server{
		{Name: "raw", Prefix: "raw__", Launch: launch, Allow: []string{"*"}, Restart: RestartOnFailure},
		{Name: "ok", Prefix: "ok__", Launch: ok, Allow: []string{"*"}, Restart: RestartOnFailure},
	}, Options{Version: "test", Hooks: Hooks{Restart: func(RestartEvent) { restarts.Add(1) }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	for i := range 2 * crashLoopMax {
		// A session remembers its server's start failure: each new
		// session starts it again.
		resp, _ := newRawClient(t, gw).call("tools/call", map[string]any{"name": "raw__t"})
		msg := fmt.Sprint(resp["error"])
		if !strings.Contains(msg, "its package did not install") || strings.Contains(msg, "try again in") || strings.Contains(msg, "giving up") {
			t.Fatalf("call %d while not set up: %v; want why, with no restart delay or give-up", i+1, resp)
		}
	}
	if n := restarts.Load(); n != 0 {
		t.Errorf("the restart hook heard of %d starts that started nothing", n)
	}
	setUp.Store(true)
	n := launches.Load()
	resp, _ := newRawClient(t, gw).call("tools/call", map[string]any{"name": "raw__t"})
	if !strings.Contains(fmt.Sprint(resp["result"]), "installed") || launches.Load() != n+1 {
		t.Fatalf("the first call once set up: %v (%d launches, want %d)", resp, launches.Load(), n+1)
	}
}
