//go:build linux

package builtin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// workspace is a server under test with real input and output roots.
type workspace struct {
	in, out string // host roots
	outside string // a directory beside the roots that must stay unreachable
	srv     *mcp.Server
	cs      *mcp.ClientSession
}

// newWorkspace starts NewServer on fresh roots and connects a client over
// in-memory transports. Everything is closed at cleanup.
func newWorkspace(t *testing.T, o Options) *workspace {
	t.Helper()
	base := t.TempDir()
	w := &workspace{in: filepath.Join(base, "in"), out: filepath.Join(base, "out"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{w.in, w.out, w.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeHost(t, filepath.Join(w.outside, "secret.txt"), "TOPSECRET marker\n")
	o.Input, o.Output = w.in, w.out
	w.srv = NewServer(o)
	w.cs = w.connect(t)
	return w
}

// connect opens one more client session to the same server.
func (w *workspace) connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := w.srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		done := make(chan struct{})
		go func() { ss.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("server session did not end")
		}
	})
	return cs
}

// call runs a tool and returns its text and whether it is an error result.
func (w *workspace) call(t *testing.T, name string, args map[string]any) (string, bool) {
	t.Helper()
	return callOn(t, w.cs, name, args)
}

func callOn(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// mustOK fails the test unless the call succeeds.
func (w *workspace) mustOK(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	got, isErr := w.call(t, name, args)
	if isErr {
		t.Fatalf("%s(%v): unexpected error: %s", name, args, got)
	}
	return got
}

// mustFail fails the test unless the call is refused with a message
// containing want and naming no host path.
func (w *workspace) mustFail(t *testing.T, name string, args map[string]any, want string) string {
	t.Helper()
	got, isErr := w.call(t, name, args)
	if !isErr {
		t.Fatalf("%s(%v) succeeded, want refusal; got %q", name, args, got)
	}
	if !strings.Contains(got, want) {
		t.Errorf("%s(%v) = %q, want it to contain %q", name, args, got, want)
	}
	if strings.Contains(got, filepath.Dir(w.in)) {
		t.Errorf("%s(%v): error names a host path: %q", name, args, got)
	}
	return got
}

func writeHost(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listTools lists the tools of w's server.
func listTools(t *testing.T, w *workspace) *mcp.ListToolsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := w.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestToolsAndAnnotations(t *testing.T) {
	res := listTools(t, newWorkspace(t, Options{}))
	type hints struct {
		ReadOnly, Destructive, Idempotent, OpenWorld bool
		Required                                     []string
	}
	got := map[string]hints{}
	for _, tool := range res.Tools {
		a := tool.Annotations
		if a == nil || a.OpenWorldHint == nil || tool.Description == "" {
			t.Fatalf("%s: missing annotations or description", tool.Name)
		}
		h := hints{ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint != nil && *a.DestructiveHint,
			Idempotent: a.IdempotentHint, OpenWorld: *a.OpenWorldHint}
		schema, _ := tool.InputSchema.(map[string]any)
		for _, r := range asSlice(schema["required"]) {
			h.Required = append(h.Required, r.(string))
		}
		slices.Sort(h.Required)
		got[tool.Name] = h
	}
	read := hints{ReadOnly: true, Idempotent: true}
	want := map[string]hints{
		"list_files":   read,
		"read_file":    {ReadOnly: true, Idempotent: true, Required: []string{"path"}},
		"search_files": {ReadOnly: true, Idempotent: true, Required: []string{"pattern"}},
		"write_file":   {Destructive: true, Idempotent: true, Required: []string{"content", "path"}},
		"edit_file":    {Destructive: true, Required: []string{"new", "old", "path"}},
		"run_command":  {Destructive: true, Required: []string{"argv"}},
		"start_job":    {Destructive: true, Required: []string{"argv"}},
		"job_status":   {ReadOnly: true, Idempotent: true, Required: []string{"id"}},
		"job_output":   {ReadOnly: true, Idempotent: true, Required: []string{"id"}},
		"stop_job":     {Destructive: true, Idempotent: true, Required: []string{"id"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// bothResolvers runs f with the kernel's openat2 and again with the
// userspace resolver that the sandbox's seccomp filter makes necessary.
func bothResolvers(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("userspace", func(t *testing.T) {
		kernelOpenat2.Store(false)
		t.Cleanup(func() { kernelOpenat2.Store(true) })
		f(t)
	})
}

// TestStartJobDescriptionJobsShared: the built-in server runs behind the
// gateway's one connection to its sandbox, which every client session
// of that sandbox shares (docs/config.md, "builtin and commands"), so
// start_job must not tell the agent that its session alone sees its jobs
// or that they end with it: another session can read and stop them.
func TestStartJobDescriptionJobsShared(t *testing.T) {
	w := newWorkspace(t, Options{})
	res, err := w.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name != "start_job" {
			continue
		}
		d := tool.Description
		if strings.Contains(d, "sees only its own jobs") || strings.Contains(d, "when this session ends") ||
			!strings.Contains(d, "every client session that shares it sees the same jobs") {
			t.Errorf("start_job description promises jobs per client session: %q", d)
		}
		return
	}
	t.Fatal("no start_job tool")
}

// TestArgvSchemaIsAnArray: run_command's and start_job's argv is an
// array in their schemas: a client that trusts
// the schema must not be told it may send null (inferred from a Go
// slice it was ["null","array"]), which the tools refuse; the SDK's
// validation names what is wrong.
func TestArgvSchemaIsAnArray(t *testing.T) {
	w := newWorkspace(t, Options{})
	res := listTools(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := 0
	for _, tool := range res.Tools {
		if tool.Name != "run_command" && tool.Name != "start_job" {
			continue
		}
		seen++
		schema, _ := tool.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		argv, _ := props["argv"].(map[string]any)
		if argv["type"] != "array" {
			t.Errorf("%s: argv schema %v; want type array", tool.Name, argv)
		}
	}
	if seen != 2 {
		t.Fatalf("found %d of run_command and start_job", seen)
	}
	r, err := w.cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"argv": nil}})
	if err == nil && !r.IsError {
		t.Fatalf("run_command with argv null ran: %+v", r)
	}
}
