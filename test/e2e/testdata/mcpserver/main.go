// Command mcpserver is a programmable stdio MCP server for the gateway's
// end-to-end tests: besides ordinary tools it can crash, write garbage or
// an oversized line to stdout, ask the client for sampling and
// elicitation, and add tools at runtime.
//
//	mcpserver -name a
//
// Tools: whoami, instance, echo, blob, slow, inflight, sample, elicit,
// add_tool, crash, garbage, huge, stderr, log, fetch_write, getenv,
// note_write, note_read, the fs_* tools of fs.go (fs_write, fs_read,
// fs_remove, fs_symlink, fs_link, fs_list), and the fault tools of
// faults.go (hang, flood, close_stdout, egress_flood).
// Prompt: greet. Resource: test://NAME/info.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdout serializes the SDK's messages with the raw bytes some tools
// write, so a raw line never lands inside a message.
type stdout struct {
	mu sync.Mutex
	f  *os.File // guarded by mu
}

func (w *stdout) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Write(p)
}

func (w *stdout) Close() error { return nil }

type server struct {
	name     string
	instance string // random per process, tells a restarted server apart
	out      *stdout
	srv      *mcp.Server
	inflight atomic.Int64 // slow calls running
}

func main() {
	name := flag.String("name", "mcpserver", "server name, returned by whoami")
	flag.Parse()
	var b [8]byte
	_, _ = rand.Read(b[:])
	s := &server{name: *name, instance: hex.EncodeToString(b[:]), out: &stdout{f: os.Stdout}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: *name, Version: "1"}, nil)
	s.register()
	s.registerFS()
	s.registerHTTPGet()
	s.registerWSEcho()
	s.registerRawArgs()
	s.registerFaults()
	s.registerStat()
	s.srv.AddReceivingMiddleware(harmlessByDefault)
	t := &mcp.IOTransport{Reader: os.Stdin, Writer: s.out}
	if err := s.srv.Run(context.Background(), t); err != nil && !errors.Is(err, context.Canceled) {
		log.Printf("mcpserver %s: %v", *name, err)
	}
}

// harmlessByDefault lists each tool that sets no annotations as neither
// destructive nor open-world. MCP takes what a tool leaves out as true, and
// mcpbox holds such calls for review; the tests that are not about review
// want their calls to run (TestUnannotatedToolsHeld runs a real server
// without annotations).
func harmlessByDefault(next mcp.MethodHandler) mcp.MethodHandler {
	no := false
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if lt, ok := res.(*mcp.ListToolsResult); ok && err == nil {
			for i, t := range lt.Tools {
				if t.Annotations == nil {
					c := *t
					c.Annotations = &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}
					lt.Tools[i] = &c
				}
			}
		}
		return res, err
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

type empty struct{}

type echoIn struct {
	Text string `json:"text"`
}

type blobIn struct {
	Bytes int `json:"bytes"`
}

type slowIn struct {
	MS    int `json:"ms" jsonschema:"milliseconds to sleep per step"`
	Steps int `json:"steps,omitempty" jsonschema:"number of steps, each followed by a progress notification; default 1"`
}

type promptIn struct {
	Prompt  string `json:"prompt"`
	DelayMS int    `json:"delay_ms,omitempty" jsonschema:"milliseconds to wait before asking"`
}

type messageIn struct {
	Message string `json:"message"`
}

type nameIn struct {
	Name string `json:"name"`
}

type hugeIn struct {
	MiB int `json:"mib"`
}

type fetchWriteIn struct {
	URL  string `json:"url" jsonschema:"plain-HTTP URL to fetch through the sandbox's egress proxy"`
	Path string `json:"path" jsonschema:"where to write the body, relative to /workspace/output"`
}

type logIn struct {
	Level string `json:"level"`
	Text  string `json:"text"`
}

func (s *server) register() {
	srv := s.srv
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "returns the server's -name"},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return text(s.name), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "instance", Description: "returns an ID unique to this process"},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return text(s.instance), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "returns text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "blob", Description: "returns one text content of that many bytes"},
		func(_ context.Context, _ *mcp.CallToolRequest, in blobIn) (*mcp.CallToolResult, any, error) {
			if in.Bytes < 0 || in.Bytes > 256<<20 {
				return nil, nil, fmt.Errorf("bytes %d out of range", in.Bytes)
			}
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "sleeps ms per step, notifying progress after each"}, s.slow)
	mcp.AddTool(srv, &mcp.Tool{Name: "inflight", Description: "returns how many slow calls are running"},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprint(s.inflight.Load())), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "sample", Description: "asks the client to sample and returns the reply's text"}, s.sample)
	mcp.AddTool(srv, &mcp.Tool{Name: "elicit", Description: "asks the client for input; returns {action, content}"}, s.elicit)
	mcp.AddTool(srv, &mcp.Tool{Name: "add_tool", Description: "adds a tool NAME that returns \"NAME from SERVER\""}, s.addTool)
	mcp.AddTool(srv, &mcp.Tool{Name: "crash", Description: "exits with status 3 during the call"},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "garbage", Description: "writes non-JSON-RPC lines to stdout, then returns"}, s.garbage)
	mcp.AddTool(srv, &mcp.Tool{Name: "huge", Description: "writes one notification line of that many MiB, then returns"}, s.huge)
	mcp.AddTool(srv, &mcp.Tool{Name: "stderr", Description: "writes text to stderr"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, in.Text)
			return text("ok"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "log", Description: "sends a log notification"},
		func(ctx context.Context, req *mcp.CallToolRequest, in logIn) (*mcp.CallToolResult, any, error) {
			err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(in.Level), Logger: s.name, Data: in.Text})
			return text("ok"), nil, err
		})
	openWorld := true
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "fetch_write",
		Description: "fetches url through the sandbox's HTTP proxy, writes the body to /workspace/output/PATH and returns its length",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: &openWorld},
	}, fetchWrite)
	mcp.AddTool(srv, &mcp.Tool{Name: "getenv", Description: "returns the value of the environment variable text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text(os.Getenv(in.Text)), nil, nil
		})
	type noteIn struct {
		Name string `json:"name"`
		Text string `json:"text,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "note_write", Description: "writes text to /workspace/output/NAME"},
		func(_ context.Context, _ *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile(filepath.Join("/workspace/output", filepath.Base(in.Name)), []byte(in.Text), 0o644); err != nil {
				return nil, nil, err
			}
			return text("ok"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "note_read", Description: "returns the text of /workspace/output/NAME"},
		func(_ context.Context, _ *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
			b, err := os.ReadFile(filepath.Join("/workspace/output", filepath.Base(in.Name)))
			if err != nil {
				return nil, nil, err
			}
			return text(string(b)), nil, nil
		})

	srv.AddPrompt(&mcp.Prompt{
		Name:        "greet",
		Description: "greets someone from this server",
		Arguments:   []*mcp.PromptArgument{{Name: "who", Required: true}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{
			Role:    "user",
			Content: &mcp.TextContent{Text: fmt.Sprintf("hello %s from %s", req.Params.Arguments["who"], s.name)},
		}}}, nil
	})
	uri := "test://" + s.name + "/info"
	srv.AddResource(&mcp.Resource{Name: "info", URI: uri, MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: "server " + s.name}}}, nil
		})
}

func (s *server) slow(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	steps := max(in.Steps, 1)
	token := req.Params.GetProgressToken()
	for i := range steps {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(time.Duration(in.MS) * time.Millisecond):
		}
		if token == nil {
			continue
		}
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: float64(i + 1), Total: float64(steps),
			Message: fmt.Sprintf("%s step %d", s.name, i+1),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("notifying progress: %w", err)
		}
	}
	return text(fmt.Sprintf("slept %d steps", steps)), nil, nil
}

// sample and elicit use multi round-trip input requests: a client on the
// 2026-07-28 protocol fulfils them and retries the call, and for older
// clients the SDK sends sampling/createMessage or elicitation/create
// itself and calls the handler again with the answer.
func (s *server) sample(ctx context.Context, req *mcp.CallToolRequest, in promptIn) (*mcp.CallToolResult, any, error) {
	switch r := req.Params.InputResponses["s"].(type) {
	case nil:
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(time.Duration(in.DelayMS) * time.Millisecond):
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"s": &mcp.CreateMessageParams{
			MaxTokens: 100,
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
		}}}, nil, nil
	case *mcp.CreateMessageWithToolsResult:
		if len(r.Content) != 1 {
			return nil, nil, fmt.Errorf("sampling returned %d contents", len(r.Content))
		}
		return sampled(r.Content[0])
	case *mcp.CreateMessageResult:
		return sampled(r.Content)
	default:
		return nil, nil, fmt.Errorf("unexpected sampling response %T", r)
	}
}

func sampled(c mcp.Content) (*mcp.CallToolResult, any, error) {
	t, ok := c.(*mcp.TextContent)
	if !ok {
		return nil, nil, fmt.Errorf("sampling returned %T, not text", c)
	}
	return text(t.Text), nil, nil
}

func (s *server) elicit(_ context.Context, req *mcp.CallToolRequest, in messageIn) (*mcp.CallToolResult, any, error) {
	switch r := req.Params.InputResponses["e"].(type) {
	case nil:
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"e": &mcp.ElicitParams{
			Message: in.Message,
			RequestedSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"answer": map[string]any{"type": "string"}},
			},
		}}}, nil, nil
	case *mcp.ElicitResult:
		b, err := json.Marshal(map[string]any{"action": r.Action, "content": r.Content})
		if err != nil {
			return nil, nil, err
		}
		return text(string(b)), nil, nil
	default:
		return nil, nil, fmt.Errorf("unexpected elicitation response %T", r)
	}
}

func (s *server) addTool(_ context.Context, _ *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
	if in.Name == "" {
		return nil, nil, errors.New("name is empty")
	}
	reply := in.Name + " from " + s.name
	mcp.AddTool(s.srv, &mcp.Tool{Name: in.Name, Description: "added at runtime"},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			return text(reply), nil, nil
		})
	return text("added " + in.Name), nil, nil
}

func (s *server) garbage(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
	lines := []string{
		"this is not JSON",
		"{not json either",
		"\x00\x01\x02 binary junk \xff\xfe",
		`{"hello":"a JSON object that is not JSON-RPC"}`,
		`[1,2,3]`,
		"",
	}
	for _, l := range lines {
		if _, err := s.out.Write([]byte(l + "\n")); err != nil {
			return nil, nil, err
		}
	}
	return text("garbage written"), nil, nil
}

func (s *server) huge(_ context.Context, _ *mcp.CallToolRequest, in hugeIn) (*mcp.CallToolResult, any, error) {
	if in.MiB < 0 || in.MiB > 1024 {
		return nil, nil, fmt.Errorf("mib %d out of range", in.MiB)
	}
	head := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","logger":"huge","data":"`
	tail := "\"}}\n"
	line := make([]byte, 0, len(head)+in.MiB<<20+len(tail))
	line = append(line, head...)
	line = append(line, strings.Repeat("h", in.MiB<<20)...)
	line = append(line, tail...)
	if _, err := s.out.Write(line); err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("wrote %d MiB", in.MiB)), nil, nil
}

// fetchWrite uses the proxy of HTTP_PROXY explicitly: Go's
// ProxyFromEnvironment never proxies loopback addresses, and the sandbox
// reaches the host only through its proxy.
func fetchWrite(ctx context.Context, _ *mcp.CallToolRequest, in fetchWriteIn) (*mcp.CallToolResult, any, error) {
	tr := &http.Transport{}
	if p := cmpOr(os.Getenv("HTTP_PROXY"), os.Getenv("http_proxy")); p != "" {
		u, err := url.Parse(p)
		if err != nil {
			return nil, nil, fmt.Errorf("parsing the proxy URL: %w", err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("fetching: status %d", resp.StatusCode)
	}
	dst := filepath.Join("/workspace/output", filepath.Clean("/"+in.Path))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(dst, body, 0o644); err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprint(len(body))), nil, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
