package guard

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
)

// BenchmarkGuardCall measures what the guard (pins, policy, rate limit,
// audit record) adds to a call through the gateway: the same in-process
// echo server, with and without the guard's hooks. Compare the two with
// benchstat -col /guard.
func BenchmarkGuardCall(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "guard=off"
		if on {
			name = "guard=on"
		}
		b.Run(name, func(b *testing.B) {
			sess := benchSession(b, on)
			ctx := context.Background()
			args := map[string]any{"text": "ping", "n": 1}
			b.ResetTimer()
			for b.Loop() {
				res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
				if err != nil || res.IsError {
					b.Fatalf("call: %v %v", err, res)
				}
			}
		})
	}
}

const benchConfig = `version: 1
servers:
  echo:
    command: [echo-server]
    tools:
      allow: ["*"]
      rules:
        - {tool: echo, when: 'args.text.startsWith("forbidden")', action: deny}
      rate_limit: {per_minute: 100000000}
`

// benchSession serves an in-process echo server through a gateway (with
// the guard when guarded) and returns a client session to it.
func benchSession(b *testing.B, guarded bool) *mcp.ClientSession {
	b.Helper()
	c, err := config.Load("bench.yaml", []byte(benchConfig))
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	book := &redact.Book{}
	opts := gateway.Options{Logger: log, Hooks: gateway.Hooks{Filter: func(_ string, raw []byte) []byte { return book.JSON(raw) }}}
	if guarded {
		dir := b.TempDir()
		g, err := New(c, Options{StateDir: dir, LockPath: filepath.Join(dir, "mcpbox.lock")}, log, book)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(g.Close)
		opts.Hooks = g.Hooks()
	}
	gw, err := gateway.New([]*gateway.Server{{Name: "echo", Scope: gateway.ScopeAgent, Allow: []string{"*"}, Launch: echoLauncher}}, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gw.Close() })
	cr, gwW := io.Pipe()
	gwR, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { gw.ServeStdio(ctx, gateway.LocalAgent, gwR, gwW); close(done) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sess.Close()
		cancel()
		cw.Close()
		<-done
	})
	return sess
}

// echoLauncher runs a go-sdk echo server in process.
func echoLauncher(ctx context.Context, scope gateway.Scope) (*gateway.Process, error) {
	return echoLauncherWith(nil)(ctx, scope)
}

// echoLauncherWith is echoLauncher whose echo first calls before, if
// non-nil, with the text (a test holds a call there).
func echoLauncherWith(before func(text string)) func(context.Context, gateway.Scope) (*gateway.Process, error) {
	return func(context.Context, gateway.Scope) (*gateway.Process, error) {
		return echoProcess(before, nil)
	}
}

// harmless are the annotations of a tool that neither writes nor reaches
// out, so that no annotation holds its calls for review (MCP takes what a
// tool leaves out as true).
func harmless() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{DestructiveHint: new(bool), OpenWorldHint: new(bool)}
}

// harmlessEcho is the echo tool's definition with harmless annotations,
// for calls made on the guard without a server's list.
var harmlessEcho = json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false,"openWorldHint":false}}`)

// echoProcess serves the echo tool, whose input schema is schema, or,
// if nil, the one the go-sdk infers (text required, no other property
// than n).
func echoProcess(before func(text string), schema any) (*gateway.Process, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
		N    int    `json:"n,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "returns text", InputSchema: schema, Annotations: harmless()},
		func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			if before != nil {
				before(a.Text)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		srv.Run(ctx, &mcp.IOTransport{Reader: inR, Writer: outW})
		outW.Close()
		close(done)
	}()
	return &gateway.Process{Stdin: inW, Stdout: outR, Stop: func() {
		cancel()
		inW.Close()
		outR.Close()
		<-done
	}}, nil
}
