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
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

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
	// A client that timed out leaves its stdio child behind.
	err = runGroup(cmd)
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

// tsFullClient declares what a full-featured client (and the gateway,
// upstream) declares; server-everything lists more tools to such a client.
const tsFullClient = `MCP_CLIENT_CAPABILITIES={"roots":{},"sampling":{},"elicitation":{"form":{},"url":{}}}`

// tsServe starts `mcpbox serve --http 127.0.0.1:0 --config cfg` (see
// gwServeIn) and returns its URL.
func tsServe(t *testing.T, m mode, cfg string, env ...string) string {
	t.Helper()
	return gwServe(t, m, cfg, env...).url
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
// Its tools run without review although server-filesystem marks its
// writes destructive: these tests compare the gateway with direct runs
// (approvals have their own tests).
func tsNodeServer(name, nodeModules, extraFS string, argv ...string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`  %s:
    command: [node, %s]
    filesystem:
      mounts: [{source: %q, target: /opt/mcp/node_modules, mode: ro}]
%s    tools: {allow: ["*"], approve_annotations: []}
`, name, strings.Join(q, ", "), nodeModules, extraFS)
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
