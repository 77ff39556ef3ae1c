package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// These tests drive the gateway with the official TypeScript MCP client
// (test/e2e/node/client.mjs over @modelcontextprotocol/sdk) against real
// third-party servers, and compare what the client sees through mcpbox with
// what it sees talking to the same server directly.

const (
	tsFilesystemJS = "/opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
	tsEverythingJS = "/opt/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)

// tsStep is one operation of client.mjs; tsReply is the JSON line it printed.
type (
	tsStep  map[string]any
	tsReply map[string]any
)

// failed reports whether the step raised an error or the tool said it failed.
func (r tsReply) failed() bool {
	_, isErr := r["error"]
	return isErr || r["isError"] == true
}

// text joins the text of every text content item.
func (r tsReply) text() string {
	var b strings.Builder
	items, _ := r["content"].([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["type"] == "text" {
			s, _ := m["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// byName indexes the list under key ("tools", "prompts") by item name.
func (r tsReply) byName(t *testing.T, key string) map[string]any {
	t.Helper()
	items, ok := r[key].([]any)
	if !ok {
		t.Fatalf("reply has no %s list: %v", key, r)
	}
	out := map[string]any{}
	for _, it := range items {
		m, _ := it.(map[string]any)
		name, _ := m["name"].(string)
		out[name] = it
	}
	return out
}

func (r tsReply) names(t *testing.T, key string) []string {
	t.Helper()
	return slices.Sorted(maps.Keys(r.byName(t, key)))
}

// tsClientScript returns client.mjs beside nodeModules (requireNode may hand
// out a world-readable copy, and the script resolves the SDK from there).
func tsClientScript(t *testing.T, nodeModules string) string {
	t.Helper()
	dst := filepath.Join(filepath.Dir(nodeModules), "client.mjs")
	tsClientCopy.Lock()
	defer tsClientCopy.Unlock()
	if _, err := os.Stat(dst); err == nil {
		return dst
	}
	src, err := os.ReadFile("node/client.mjs")
	if err == nil {
		err = os.WriteFile(dst, src, 0o644)
	}
	if err != nil {
		t.Fatalf("placing client.mjs: %v", err)
	}
	return dst
}

var tsClientCopy sync.Mutex

// runTSClient runs client.mjs as m's user with args and steps and returns one
// reply per step. It fails the test unless the client exits 0.
func runTSClient(t *testing.T, m mode, nodeModules string, env []string, steps []tsStep, args ...string) []tsReply {
	t.Helper()
	in, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{tsClientScript(t, nodeModules)}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LANG=C.UTF-8", "MCP_CLIENT_TIMEOUT_S=60"}, env...)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !m.root() {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(m.uid), Gid: uint32(m.uid), Groups: []uint32{}}
	}
	err = cmd.Run()
	if cmd.Process != nil {
		// A client that timed out leaves its stdio child behind.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil || ctx.Err() != nil {
		t.Fatalf("client.mjs %v: %v (ctx: %v)\nstdout:\n%s\nstderr:\n%s", args, err, ctx.Err(), out.String(), errb.String())
	}
	var replies []tsReply
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line == "" {
			continue
		}
		var r tsReply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("client.mjs printed %q: %v\nstderr:\n%s", line, err, errb.String())
		}
		replies = append(replies, r)
	}
	if len(replies) != len(steps) {
		t.Fatalf("client.mjs gave %d replies to %d steps\nstdout:\n%s\nstderr:\n%s", len(replies), len(steps), out.String(), errb.String())
	}
	t.Logf("client.mjs %s stderr:\n%s", args[0], errb.String())
	return replies
}

// tsDirect runs steps against a server started by the client itself, with no
// mcpbox in between: the reference the gateway's answers must match.
func tsDirect(t *testing.T, nodeModules string, env []string, steps []tsStep, argv ...string) []tsReply {
	t.Helper()
	return runTSClient(t, mode{name: "direct", uid: -1}, nodeModules, env, steps, append([]string{"stdio", "--", "node"}, argv...)...)
}

// tsViaRun runs steps against `mcpbox run [mode flags] FLAGS -- node ARGV`.
func tsViaRun(t *testing.T, m mode, nodeModules string, env []string, steps []tsStep, flags []string, argv ...string) []tsReply {
	t.Helper()
	args := append([]string{"stdio", "--", mcpboxBin, "run"}, m.flags...)
	args = append(append(append(args, "--mount", nodeModules+":/opt/mcp/node_modules:ro"), flags...), "--", "node")
	return runTSClient(t, m, nodeModules, env, steps, append(args, argv...)...)
}

func tsRandomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func tsCall(name string, args map[string]any) tsStep {
	return tsStep{"op": "callTool", "name": name, "arguments": args}
}

// tsRaw calls a tool and keeps the raw result, unknown keys included.
func tsRaw(name string, args map[string]any) tsStep {
	return tsStep{"op": "request", "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}}
}

// TestTSClientRunFilesystem: `mcpbox run` wraps server-filesystem; the TS
// client reads the input, writes the output, and cannot write elsewhere.
func TestTSClientRunFilesystem(t *testing.T) {
	nodeModules := requireNode(t)
	forEachMode(t, func(t *testing.T, m mode) {
		in, out := m.dir(t), m.dir(t)
		content := "from the host " + tsRandomHex(t) + "\n"
		m.writeFile(t, filepath.Join(in, "hello.txt"), content, 0o644)
		written := "from the client " + tsRandomHex(t)
		r := tsViaRun(t, m, nodeModules, nil, []tsStep{
			{"op": "listTools"},
			tsCall("read_text_file", map[string]any{"path": "/workspace/input/hello.txt"}),
			tsCall("write_file", map[string]any{"path": "/workspace/output/out.txt", "content": written}),
			tsCall("write_file", map[string]any{"path": "/workspace/input/evil.txt", "content": "x"}),
			tsCall("write_file", map[string]any{"path": "/tmp/evil.txt", "content": "x"}),
			tsCall("write_file", map[string]any{"path": "/workspace/output/../input/evil2.txt", "content": "x"}),
		}, []string{"--input", in, "--output", out},
			tsFilesystemJS, "/workspace/input", "/workspace/output")

		names := r[0].names(t, "tools")
		for _, want := range []string{"read_text_file", "write_file", "list_directory"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools/list lacks %s: %v", want, names)
			}
		}
		if r[1].failed() || r[1].text() != content {
			t.Errorf("read_text_file = %v, want the text %q", r[1], content)
		}
		if got, err := os.ReadFile(filepath.Join(out, "out.txt")); err != nil || string(got) != written {
			t.Errorf("write_file to the output: host file %q (%v), want %q; reply %v", got, err, written, r[2])
		}
		for i, p := range []string{"/workspace/input/evil.txt", "/tmp/evil.txt", "/workspace/output/../input/evil2.txt"} {
			if !r[3+i].failed() {
				t.Errorf("write_file %s succeeded: %v", p, r[3+i])
			}
		}
		for _, f := range []string{"evil.txt", "evil2.txt"} {
			if _, err := os.Stat(filepath.Join(in, f)); err == nil {
				t.Errorf("the server wrote %s into the input directory", f)
			}
		}
	})
}

// tsFullClient declares what a full-featured client (and the gateway,
// upstream) declares; server-everything lists more tools to such a client.
const tsFullClient = `MCP_CLIENT_CAPABILITIES={"roots":{},"sampling":{},"elicitation":{"form":{},"url":{}}}`

// TestTSClientRunEverything: through `mcpbox run`, server-everything looks
// exactly as it does directly to the same client: same tools/list and
// prompts, same results with annotations, structured content and resource
// links.
func TestTSClientRunEverything(t *testing.T) {
	nodeModules := requireNode(t)
	msg := "hello " + tsRandomHex(t)
	steps := []tsStep{
		{"op": "request", "method": "tools/list"},
		{"op": "request", "method": "prompts/list"},
		tsCall("echo", map[string]any{"message": msg}),
		tsRaw("get-annotated-message", map[string]any{"messageType": "error", "includeImage": true}),
		tsRaw("get-structured-content", map[string]any{"location": "Chicago"}),
		tsRaw("get-resource-links", map[string]any{"count": 2}),
		tsRaw("get-sum", map[string]any{"a": 19, "b": 23}),
		{"op": "getPrompt", "name": "args-prompt", "arguments": map[string]any{"city": "Lyon"}},
	}
	for _, c := range []struct{ name, env string }{{"full client", tsFullClient}, {"plain client", "MCP_CLIENT_CAPABILITIES={}"}} {
		t.Run(c.name, func(t *testing.T) {
			env := []string{c.env}
			want := tsDirect(t, nodeModules, env, steps, filepath.Join(nodeModules, "@modelcontextprotocol/server-everything/dist/index.js"), "stdio")
			for i, w := range want {
				if w.failed() {
					t.Fatalf("direct step %v failed: %v", steps[i], w)
				}
			}
			if want[2].text() != "Echo: "+msg {
				t.Fatalf("direct echo = %v: the reference run is broken", want[2])
			}
			forEachMode(t, func(t *testing.T, m mode) {
				got := tsViaRun(t, m, nodeModules, env, steps, nil, tsEverythingJS, "stdio")
				if got[2].failed() || got[2].text() != "Echo: "+msg {
					t.Errorf("echo through mcpbox = %v, want the text %q", got[2], "Echo: "+msg)
				}
				if d := cmp.Diff(want[0].byName(t, "tools"), got[0].byName(t, "tools")); d != "" {
					t.Errorf("tools/list through mcpbox differs from the direct run (-direct +mcpbox):\n%s", d)
				}
				if d := cmp.Diff(want[1].byName(t, "prompts"), got[1].byName(t, "prompts")); d != "" {
					t.Errorf("prompts/list through mcpbox differs from the direct run (-direct +mcpbox):\n%s", d)
				}
				for i := 3; i < len(steps); i++ {
					if d := cmp.Diff(want[i], got[i]); d != "" {
						t.Errorf("step %v through mcpbox differs from the direct run (-direct +mcpbox):\n%s", steps[i], d)
					}
				}
			})
		})
	}
}

// tsLog keeps what mcpbox serve wrote and finds its serving URL.
type tsLog struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

var tsServingRE = regexp.MustCompile(`(?m)^mcpbox: serving MCP on (\S+)$`)

func (l *tsLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *tsLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// tsServe starts `mcpbox serve --http 127.0.0.1:0 --config cfg` in mode m,
// returns its MCP URL, and stops it with SIGTERM at cleanup, expecting exit
// code 0.
func tsServe(t *testing.T, m mode, cfg string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	cmd := m.command(ctx, "serve", "--config", cfg, "--http", "127.0.0.1:0")
	cmd.Env = append(cmd.Env, env...)
	log := &tsLog{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting mcpbox serve: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	t.Cleanup(func() {
		defer cancel()
		if exited {
			return
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("mcpbox serve after SIGTERM: %v, want exit 0\n%s", err, log)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("mcpbox serve did not stop within 30 s of SIGTERM\n%s", log)
		}
	})
	for deadline := time.Now().Add(90 * time.Second); ; {
		if sm := tsServingRE.FindStringSubmatch(log.String()); sm != nil {
			if !strings.HasPrefix(sm[1], "http://127.0.0.1:") || !strings.HasSuffix(sm[1], "/mcp") {
				t.Fatalf("serving on %q, want http://127.0.0.1:PORT/mcp", sm[1])
			}
			return sm[1]
		}
		select {
		case err := <-done:
			exited = true
			t.Fatalf("mcpbox serve exited before serving: %v\n%s", err, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcpbox serve printed no serving line in 90 s\n%s", log)
		}
	}
}

// tsConfig writes an mcpbox.yaml readable by m's user with a state dir
// it owns; servers is the YAML of the servers mapping, indented by 2.
func tsConfig(t *testing.T, m mode, extra, servers string) string {
	t.Helper()
	dir := m.dir(t)
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nstate_dir: %q\n", filepath.Join(dir, "state"))
	if !m.root() {
		b.WriteString("sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n")
	}
	b.WriteString(extra)
	b.WriteString("servers:\n" + servers)
	cfg := filepath.Join(dir, "mcpbox.yaml")
	m.writeFile(t, cfg, b.String(), 0o644)
	t.Logf("config:\n%s", b.String())
	return cfg
}

// tsNodeServer is the YAML of one server running node with the npm peers.
func tsNodeServer(name, nodeModules, extraFS string, argv ...string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`  %s:
    command: [node, %s]
    filesystem:
      mounts: [{source: %q, target: /opt/mcp/node_modules, mode: ro}]
%s    tools: {allow: ["*"]}
`, name, strings.Join(q, ", "), nodeModules, extraFS)
}

// TestTSClientServeTwoServers: one HTTP gateway in front of both servers,
// tool and prompt names prefixed with SERVER__.
func TestTSClientServeTwoServers(t *testing.T) {
	nodeModules := requireNode(t)
	hostIn := t.TempDir()
	list := []tsStep{{"op": "listTools"}, {"op": "listPrompts"}}
	env := []string{tsFullClient}
	wantFS := tsDirect(t, nodeModules, env, list, filepath.Join(nodeModules, "@modelcontextprotocol/server-filesystem/dist/index.js"), hostIn)
	prompt := map[string]any{"city": "Oslo", "state": "n/a"}
	wantEv := tsDirect(t, nodeModules, env, append(list, tsStep{"op": "getPrompt", "name": "args-prompt", "arguments": prompt}), filepath.Join(nodeModules, "@modelcontextprotocol/server-everything/dist/index.js"), "stdio")
	if b, _ := json.Marshal(wantEv[2]); wantEv[2].failed() || !strings.Contains(string(b), "Oslo") {
		t.Fatalf("direct args-prompt = %s: the reference run is broken", b)
	}
	// What the gateway should list: each server's items, renamed.
	wantTools, wantPrompts := map[string]any{}, map[string]any{}
	for prefix, r := range map[string][]tsReply{"fs__": wantFS, "everything__": wantEv} {
		tsPrefixed(t, wantTools, prefix, r[0], "tools")
		if !r[1].failed() { // server-filesystem has no prompts
			tsPrefixed(t, wantPrompts, prefix, r[1], "prompts")
		}
	}

	forEachMode(t, func(t *testing.T, m mode) {
		in := m.dir(t)
		content := "served " + tsRandomHex(t)
		m.writeFile(t, filepath.Join(in, "note.txt"), content, 0o644)
		cfg := tsConfig(t, m, "",
			tsNodeServer("fs", nodeModules, fmt.Sprintf("      input: {source: %q}\n", in), tsFilesystemJS, "/workspace/input")+
				tsNodeServer("everything", nodeModules, "", tsEverythingJS, "stdio"))
		url := tsServe(t, m, cfg)
		msg := "prefixed " + tsRandomHex(t)
		r := runTSClient(t, m, nodeModules, env, []tsStep{
			{"op": "listTools"},
			{"op": "listPrompts"},
			tsCall("fs__read_text_file", map[string]any{"path": "/workspace/input/note.txt"}),
			tsCall("everything__echo", map[string]any{"message": msg}),
			tsCall("echo", map[string]any{"message": msg}),
			{"op": "getPrompt", "name": "everything__args-prompt", "arguments": prompt},
		}, "http", url)
		if d := cmp.Diff(wantTools, r[0].byName(t, "tools")); d != "" {
			t.Errorf("tools/list through the gateway differs from the direct runs, prefixed (-want +got):\n%s", d)
		}
		if d := cmp.Diff(wantPrompts, r[1].byName(t, "prompts")); d != "" {
			t.Errorf("prompts/list through the gateway differs from the direct runs, prefixed (-want +got):\n%s", d)
		}
		if r[2].failed() || r[2].text() != content {
			t.Errorf("fs__read_text_file = %v, want the text %q", r[2], content)
		}
		if r[3].failed() || r[3].text() != "Echo: "+msg {
			t.Errorf("everything__echo = %v, want the text %q", r[3], "Echo: "+msg)
		}
		if !r[4].failed() {
			t.Errorf("the unprefixed name echo was served with two servers: %v", r[4])
		}
		if d := cmp.Diff(wantEv[2], r[5]); d != "" {
			t.Errorf("everything__args-prompt differs from the direct args-prompt (-direct +gateway):\n%s", d)
		}
	})
}

// tsPrefixed adds the items of r's list key to into, named prefix+name.
func tsPrefixed(t *testing.T, into map[string]any, prefix string, r tsReply, key string) {
	t.Helper()
	for name, it := range r.byName(t, key) {
		item := maps.Clone(it.(map[string]any))
		item["name"] = prefix + name
		into[prefix+name] = item
	}
}

// TestTSClientAgentIsolation: two clients of one gateway get separate
// sandboxes and outputs; the HTTP edge refuses strangers.
func TestTSClientAgentIsolation(t *testing.T) {
	nodeModules := requireNode(t)
	forEachMode(t, func(t *testing.T, m mode) {
		alice, bob := tsRandomHex(t), tsRandomHex(t)
		cfg := tsConfig(t, m, `clients:
  - {name: alice, token: {from: env:TOKEN_ALICE}}
  - {name: bob, token: {from: env:TOKEN_BOB}}
`, tsNodeServer("files", nodeModules, "      output: {}\n    scope: agent\n", tsFilesystemJS, "/workspace/output"))
		url := tsServe(t, m, cfg, "TOKEN_ALICE="+alice, "TOKEN_BOB="+bob)
		secret := "alice's secret " + tsRandomHex(t)
		const path = "/workspace/output/secret.txt"
		ra := runTSClient(t, m, nodeModules, nil, []tsStep{
			tsCall("write_file", map[string]any{"path": path, "content": secret}),
			tsCall("list_directory", map[string]any{"path": "/workspace/output"}),
		}, "http", url, "--token", alice)
		if ra[0].failed() || !strings.Contains(ra[1].text(), "secret.txt") {
			t.Fatalf("alice could not write and list her file: %v / %v", ra[0], ra[1])
		}
		// The file landed once, in alice's dir under the state dir.
		state := filepath.Join(filepath.Dir(cfg), "state")
		if n := tsCountFiles(t, state, "secret.txt", secret); n != 1 {
			t.Errorf("%d copies of alice's file under %s, want 1", n, state)
		}

		rb := runTSClient(t, m, nodeModules, nil, []tsStep{
			tsCall("list_directory", map[string]any{"path": "/workspace/output"}),
			tsCall("read_text_file", map[string]any{"path": path}),
			tsCall("search_files", map[string]any{"path": "/workspace/output", "pattern": "**/secret*"}),
		}, "http", url, "--token", bob)
		if rb[0].failed() {
			t.Errorf("bob cannot list his own output: %v", rb[0])
		}
		if strings.Contains(rb[0].text(), "secret.txt") {
			t.Errorf("bob sees alice's file: %v", rb[0])
		}
		if !rb[1].failed() || strings.Contains(rb[1].text(), secret) {
			t.Errorf("bob read alice's file: %v", rb[1])
		}
		if strings.Contains(rb[2].text(), "secret.txt") {
			t.Errorf("bob found alice's file: %v", rb[2])
		}

		// A later session of alice's still has it (scope agent).
		ra = runTSClient(t, m, nodeModules, nil, []tsStep{
			tsCall("read_text_file", map[string]any{"path": path}),
		}, "http", url, "--token", alice)
		if ra[0].failed() || ra[0].text() != secret {
			t.Errorf("alice's second session read %v, want %q", ra[0], secret)
		}

		tsCheckRefusals(t, url, alice)
	})
}

// tsCountFiles counts files called name holding content under root.
func tsCountFiles(t *testing.T, root, name, content string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != name {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && string(b) == content {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return n
}

// tsCheckRefusals sends an initialize request with plain net/http: accepted
// with the token, refused without it, with another, from a foreign Origin
// or for a foreign Host.
func tsCheckRefusals(t *testing.T, url, token string) {
	t.Helper()
	port := url[strings.LastIndex(url, ":")+1 : strings.LastIndex(url, "/")]
	cases := []struct {
		name   string
		token  string
		origin string
		host   string
		want   int
	}{
		{name: "good token", token: token, want: http.StatusOK},
		{name: "no token", want: http.StatusUnauthorized},
		{name: "wrong token", token: "x" + token, want: http.StatusUnauthorized},
		{name: "foreign origin", token: token, origin: "http://evil.example", want: http.StatusForbidden},
		{name: "foreign host", token: token, host: "evil.example:" + port, want: http.StatusForbidden},
	}
	const body = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	client := &http.Client{Timeout: 30 * time.Second}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			if c.host != "" {
				req.Host = c.host
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("POST %s: %v", url, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("status %d, want %d", resp.StatusCode, c.want)
			}
		})
	}
}
