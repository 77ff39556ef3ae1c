package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resourceServer is a go-sdk server that offers uris and accepts
// subscriptions to them.
func resourceServer(name string, uris ...string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	for _, uri := range uris {
		s.AddResource(&mcp.Resource{URI: uri, Name: "r"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: name}}}, nil
		})
	}
	return s
}

// updates collects the resources/updated URIs a client receives.
type updates struct {
	mu   sync.Mutex
	uris []string
	got  chan string
}

func (u *updates) options() *mcp.ClientOptions {
	u.got = make(chan string, 16)
	return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		u.mu.Lock()
		u.uris = append(u.uris, req.Params.URI)
		u.mu.Unlock()
		u.got <- req.Params.URI
	}}
}

func (u *updates) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.uris...)
}

func (u *updates) wait(t *testing.T, who, uri string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-u.got:
			if got == uri {
				return
			}
		case <-timeout:
			t.Fatalf("%s never received the update of %s (got %v)", who, uri, u.seen())
		}
	}
}

// TestResourceUpdatedRoutedByServer: a shared server's update of a URI
// reaches only the clients that subscribed to that URI on that server,
// not a client subscribed to the same URI on its own private server.
func TestResourceUpdatedRoutedByServer(t *testing.T) {
	const same, marker = "test://same/r", "test://pub/marker"
	pub := resourceServer("pub", same, marker)
	priv := sdkLauncher(func(sc Scope) *mcp.Server {
		if sc.Agent == "bob" {
			return resourceServer("priv-bob", same)
		}
		return resourceServer("priv-" + sc.Agent)
	}, nil, nil)
	gw := newGateway(t,
		// priv first: bob's subscription resolves to his own server.
		&Server{Name: "priv", Prefix: "p_", Scope: ScopeAgent, Launch: priv, Allow: []string{"*"}},
		&Server{Name: "pub", Prefix: "s_", Scope: ScopeShared, Launch: sdkLauncher(func(Scope) *mcp.Server { return pub }, nil, nil), Allow: []string{"*"}},
	)
	url := serveHTTP(t, gw, HTTPOptions{
		Clients: []Client{{Name: "alice", Token: []byte("alice-token-0123456789")}, {Name: "bob", Token: []byte("bob-token-0123456789ab")}},
	})
	var toAlice, toBob updates
	alice := connect(t, url, "alice-token-0123456789", toAlice.options())
	bob := connect(t, url, "bob-token-0123456789ab", toBob.options())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, sub := range []struct {
		cs  *mcp.ClientSession
		uri string
	}{{alice, same}, {bob, same}, {bob, marker}} {
		if err := sub.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: sub.uri}); err != nil {
			t.Fatalf("subscribing to %s: %v", sub.uri, err)
		}
	}
	// The shared server updates the URI, then one that bob subscribed to
	// on it: both pass the same queue to bob, so once the marker is there,
	// a misrouted update would be too.
	pub.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: same})
	pub.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: marker})
	toAlice.wait(t, "alice", same)
	toBob.wait(t, "bob", marker)
	time.Sleep(100 * time.Millisecond) // the client may handle notifications concurrently
	for _, uri := range toBob.seen() {
		if uri == same {
			t.Fatalf("bob received the shared server's update of %s, which he subscribed to on his private server", same)
		}
	}
}

// lineLog counts the lines a gateway logs.
type lineLog struct {
	mu    sync.Mutex
	lines int
	first []string // the first few, for failure messages
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line == "" {
			continue
		}
		if l.lines++; len(l.first) < 10 {
			l.first = append(l.first, line)
		}
	}
	return len(p), nil
}

func (l *lineLog) count() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines, append([]string(nil), l.first...)
}

// listWatch reads everything a raw client receives: it counts the
// tools/list_changed, notes when the last came, and passes responses on.
type listWatch struct {
	mu      sync.Mutex
	n       int       // guarded by mu
	last    time.Time // guarded by mu
	results chan map[string]any
}

func watchLists(c *rawClient) *listWatch {
	w := &listWatch{results: make(chan map[string]any, 16)}
	go func() {
		for msg := range c.lines {
			<-c.rawLn
			switch {
			case msg["method"] == "notifications/tools/list_changed":
				w.mu.Lock()
				w.n++
				w.last = time.Now()
				w.mu.Unlock()
			case msg["method"] == nil:
				w.results <- msg
			}
		}
	}()
	return w
}

func (w *listWatch) count() (int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, w.last
}

// TestListChangedFloodCoalesced: a server that sends 200,000
// tools/list_changed (and garbage, and log messages) in a burst gets a
// bounded number of notifications to the other clients of it, the last
// change is still announced after the burst, and the gateway's log stays
// a few lines long.
func TestListChangedFloodCoalesced(t *testing.T) {
	const flood = 200_000
	var sentAt atomic.Pointer[time.Time]
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] != "tools/call" {
			return
		}
		// One write, not one per line: the burst is as fast as the pipe.
		var b strings.Builder
		for i := range flood - 1 {
			b.WriteString(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n")
			if i%100 == 0 {
				b.WriteString(`not json ` + strconv.Itoa(i) + "\n")
				b.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"line ` + strconv.Itoa(i) + `"}}` + "\n")
			}
		}
		s.mu.Lock()
		s.out.Write([]byte(b.String()))
		s.mu.Unlock()
		now := time.Now() // before the last one: what comes later is caused by it, or later still
		sentAt.Store(&now)
		s.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		s.reply(msg, `{"content":[{"type":"text","text":"flooded"}]}`)
	})
	log := &lineLog{}
	gw, err := New([]*Server{{Name: "raw", Scope: ScopeShared, Launch: launch, Allow: []string{"*"}}},
		Options{Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	flooder := newRawClient(t, gw)
	other := newRawClient(t, gw)
	toOther := watchLists(other)
	before, _ := log.count()

	// By hand: the burst takes longer than rawClient.call waits under -race.
	start := time.Now()
	flooder.w.Write([]byte(`{"jsonrpc":"2.0","id":"flood","method":"tools/call","params":{"name":"flood"}}` + "\n"))
	toFlooder := watchLists(flooder)
	var resp map[string]any
	for timeout := time.After(2 * time.Minute); resp == nil; {
		select {
		case resp = <-toFlooder.results:
		case <-timeout:
			t.Fatal("the flood call never ended")
		}
	}
	if !strings.Contains(fmt.Sprint(resp["result"]), "flooded") {
		t.Fatalf("flood call: %v", resp)
	}
	burst := time.Since(start)
	// The last change reaches the other client after the burst.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, last := toOther.count(); last.After(*sentAt.Load()) {
			break
		}
		if time.Now().After(deadline) {
			n, last := toOther.count()
			t.Fatalf("the other client got %d list_changed, the last at %s, none after the burst ended at %s", n, last, *sentAt.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * listChangedEvery) // anything still pending arrives
	n, _ := toOther.count()
	m, _ := toFlooder.count()
	t.Logf("burst of %s: %d and %d list_changed delivered", burst, n, m)
	if n > 100 || m > 100 {
		t.Fatalf("%d list_changed delivered to the other client and %d to the flooding one, want at most 100 each", n, m)
	}
	if lines, first := log.count(); lines-before > 100 {
		t.Fatalf("the gateway logged %d lines about the flood, want a few; first: %q", lines-before, first)
	}
}

// TestWarningsRateLimited: a warning a server can cause at will logs at
// most warnBurst lines per window, however often it happens, and each
// message has its own budget.
func TestWarningsRateLimited(t *testing.T) {
	log := &lineLog{}
	logger := slog.New(slog.NewTextHandler(log, nil))
	var w warnings
	for i := range 10_000 {
		w.warn(logger, "dropped a message from the server", "n", i)
		w.warn(logger, "client too slow: notification dropped", "n", i)
	}
	if n, first := log.count(); n != 2*warnBurst {
		t.Fatalf("%d lines logged for 20,000 warnings, want %d; first: %q", n, 2*warnBurst, first)
	}
}
