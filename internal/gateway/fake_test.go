package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawServer is an upstream written for the tests: it speaks newline-
// delimited JSON-RPC by hand, so a test can send exactly the bytes it
// wants (unknown fields, garbage, oversized lines) and see exactly what
// the gateway sends.
type rawServer struct {
	t      testing.TB
	handle func(s *rawServer, msg map[string]any) // called per message
	in     *bufio.Reader
	out    io.WriteCloser
	mu     sync.Mutex
	seen   []map[string]any
	done   chan struct{}
}

func (s *rawServer) send(v any) {
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	default:
		b, _ = json.Marshal(v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.Write(append(b, '\n'))
}

func (s *rawServer) reply(msg map[string]any, result string) {
	id, _ := json.Marshal(msg["id"])
	s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`)
}

func (s *rawServer) received(method string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, m := range s.seen {
		if m["method"] == method {
			out = append(out, m)
		}
	}
	return out
}

func (s *rawServer) serve() {
	defer close(s.done)
	defer s.out.Close()
	for {
		line, err := s.in.ReadBytes('\n')
		if err != nil {
			return
		}
		var msg map[string]any
		if json.Unmarshal(line, &msg) != nil {
			continue
		}
		s.mu.Lock()
		s.seen = append(s.seen, msg)
		s.mu.Unlock()
		if msg["method"] == "initialize" {
			s.reply(msg, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"raw","version":"1"},"instructions":"raw server"}`)
			continue
		}
		if s.handle != nil {
			s.handle(s, msg)
		}
	}
}

// rawLauncher returns a Launch function that starts a new rawServer per
// call, and the list of servers it started.
func rawLauncher(t testing.TB, handle func(*rawServer, map[string]any)) (func(context.Context, Scope) (*Process, error), func() []*rawServer) {
	var mu sync.Mutex
	var started []*rawServer
	launch := func(ctx context.Context, scope Scope) (*Process, error) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		s := &rawServer{t: t, handle: handle, in: bufio.NewReader(inR), out: outW, done: make(chan struct{})}
		mu.Lock()
		started = append(started, s)
		mu.Unlock()
		go s.serve()
		return &Process{
			Stdin: inW, Stdout: outR,
			Roots: []Root{{URI: "file:///workspace/input", Name: "input"}},
			Stop: func() {
				inW.Close()
				inR.Close()
				outR.Close()
				<-s.done
			},
		}, nil
	}
	return launch, func() []*rawServer {
		mu.Lock()
		defer mu.Unlock()
		return append([]*rawServer(nil), started...)
	}
}

// sdkLauncher runs a go-sdk server in process per scope; scopes records
// which scopes were launched.
func sdkLauncher(newServer func(scope Scope) *mcp.Server, scopes *[]Scope, mu *sync.Mutex) func(context.Context, Scope) (*Process, error) {
	return func(ctx context.Context, scope Scope) (*Process, error) {
		if mu != nil {
			mu.Lock()
			*scopes = append(*scopes, scope)
			mu.Unlock()
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		srv := newServer(scope)
		sctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.Run(sctx, &mcp.IOTransport{Reader: inR, Writer: outW})
			outW.Close()
		}()
		return &Process{
			Stdin: inW, Stdout: outR,
			Stop: func() {
				cancel()
				inW.Close()
				outR.Close()
				select {
				case <-done:
				case <-time.After(5 * time.Second):
				}
			},
		}, nil
	}
}

// rawClient drives a gateway's stdio side by hand.
type rawClient struct {
	t      testing.TB
	w      io.WriteCloser
	lines  chan map[string]any
	rawLn  chan []byte
	nextID atomic.Int64
	errc   chan error
	notes  []map[string]any // notifications seen by call
	init   map[string]any   // the initialize response
}

func newRawClient(t testing.TB, gw *Gateway) *rawClient {
	t.Helper()
	cInR, cInW := io.Pipe()   // client → gateway
	cOutR, cOutW := io.Pipe() // gateway → client
	c := &rawClient{t: t, w: cInW, lines: make(chan map[string]any, 1024), rawLn: make(chan []byte, 1024), errc: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { c.errc <- gw.ServeStdio(ctx, LocalAgent, cInR, cOutW) }()
	go func() {
		r := bufio.NewReaderSize(cOutR, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				close(c.lines)
				return
			}
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				c.rawLn <- line
				c.lines <- m
			}
		}
	}()
	t.Cleanup(func() {
		cInW.Close()
		cancel()
		select {
		case <-c.errc:
		case <-time.After(10 * time.Second):
			t.Error("ServeStdio did not return")
		}
		cOutR.Close()
	})
	c.init, _ = c.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}})
	c.notify("notifications/initialized", nil)
	return c
}

func (c *rawClient) notify(method string, params any) {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	c.w.Write(append(b, '\n'))
}

// call sends a request and returns its response line (raw) and decoded,
// skipping notifications, which go to notes.
func (c *rawClient) call(method string, params any) (map[string]any, []byte) {
	c.t.Helper()
	id := c.nextID.Add(1)
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	c.w.Write(append(b, '\n'))
	timeout := time.After(20 * time.Second)
	for {
		select {
		case msg, ok := <-c.lines:
			raw := <-c.rawLn
			if !ok {
				c.t.Fatalf("%s: connection closed", method)
			}
			if v, ok := msg["id"].(float64); ok && int64(v) == id && msg["method"] == nil {
				return msg, raw
			}
			if msg["id"] == nil {
				c.notes = append(c.notes, msg)
			}
		case <-timeout:
			c.t.Fatalf("%s: no response", method)
		}
	}
}
