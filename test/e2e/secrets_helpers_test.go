package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const hostilePkg = "mcpbox/test/e2e/testdata/hostile"

// hsTools are the hostile server's tools (testdata/hostile/tools.go).
var hsTools = []string{"forms", "forms_html", "chunked", "rpc_error", "notify", "sample", "elicit", "stderr", "garbage", "peek", "split"}

func hsGateway(t *testing.T, m mode, version string) {
	a, b := hsSecret(t), hsSecret(t)
	dir := gwDir(t, m)
	fileB := filepath.Join(dir, "file_b")
	m.writeFile(t, fileB, b+"\n", 0o600)
	bin := goBuild(t, hostilePkg)
	g := gwServe(t, m, hsWriteConfig(t, m, dir, map[string]any{
		"hostile": hsServer(bin, "hostile", map[string]any{
			"TOKEN_A": map[string]string{"from": "env:HOSTILE_TOKEN_A"},
			"FILE_B":  map[string]string{"from": "file:" + fileB, "as": "file"},
		}),
		"peer": hsServer(bin, "peer", nil),
	}), "HOSTILE_TOKEN_A="+a)

	tee := &hsTee{next: &http.Transport{DisableCompression: true}}
	defer tee.next.CloseIdleConnections()
	c := newHSClient()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess, err := gwConnectErr(ctx, g.url, &http.Client{Transport: tee}, c.options(), version)
	if err != nil {
		t.Fatalf("connecting to %s: %v", g.url, err)
	}
	answers := hsExercise(t, ctx, sess, c, "hostile__")
	peer := hsCallText(t, ctx, sess, c, "peer__peek")
	gwClose(t, sess)
	g.stop(t)

	// Positive: every channel carried the secrets, redacted.
	markers := []string{"[REDACTED:TOKEN_A]", "[REDACTED:FILE_B]"}
	for _, mk := range markers {
		if !bytes.Contains(tee.bytes(), []byte(mk)) {
			t.Errorf("the client never received %s: the test proves nothing", mk)
		}
	}
	for _, tool := range hsTools {
		if tool != "peek" && !hsHasAll(answers["hostile__"+tool], markers) {
			t.Errorf("hostile__%s: answer lacks the redacted secrets: %q", tool, answers["hostile__"+tool])
		}
	}
	for _, kind := range []string{"initialize", "sampling", "elicitation", "log", "progress", "resources/read", "prompts/get"} {
		if got := c.text(kind); !hsHasAll(got, markers) {
			t.Errorf("%s: the client got no redacted secrets: %q", kind, got)
		}
	}
	if !g.logs.waitFor("hostile hostile stderr: TOKEN_A=[REDACTED:TOKEN_A]", 10*time.Second) {
		t.Errorf("mcpbox's log lacks the server's redacted stderr line:\n%s", g.logs)
	}
	// The secrets are the hostile server's alone: it sees their names,
	// the peer sees nothing of them.
	own := answers["hostile__peek"]
	for _, want := range []string{"TOKEN_A=[REDACTED:TOKEN_A]", "/run/secrets/FILE_B: [REDACTED:FILE_B]"} {
		if !strings.Contains(own, want) {
			t.Errorf("hostile__peek lacks %q:\n%s", want, own)
		}
	}
	if !strings.Contains(peer, "instance peer") {
		t.Errorf("peer__peek did not answer: %q", peer)
	}
	if strings.Contains(own, "HOSTILE_TOKEN_A") {
		t.Errorf("mcpbox's own variable reached the sandbox:\n%s", own)
	}
	for _, bad := range []string{"TOKEN_A", "FILE_B", "REDACTED"} {
		if strings.Contains(peer, bad) {
			t.Errorf("peer__peek shows %q:\n%s", bad, peer)
		}
	}

	// Negative: no form of either secret anywhere.
	forms := append(hsForms("TOKEN_A", a), hsForms("FILE_B", b)...)
	hsScan(t, "the raw HTTP bytes the client received", tee.bytes(), forms)
	for _, it := range c.all() {
		hsScan(t, "what the client got, decoded: "+it.kind, []byte(it.text), forms)
	}
	hsScan(t, "mcpbox's stderr", []byte(g.logs.String()), forms)
	files := 0
	state := filepath.Join(dir, "state")
	err = filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		hsScan(t, "the state dir's file name "+p, []byte(p), forms)
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			hsScan(t, "the state dir's file "+p, data, forms)
		}
		return nil
	})
	if err != nil {
		t.Errorf("walking the state dir: %v", err)
	}
	t.Logf("scanned %d bytes from the client, %d of log, %d files in the state dir, for %d forms",
		len(tee.bytes()), len(g.logs.String()), files, len(forms))
}

// hsSecret makes a secret value whose encodings all differ from it: URL,
// JSON and HTML special characters, each followed by a random printable
// one, so that any 16 bytes of it are this value's alone.
func hsSecret(t *testing.T) string {
	t.Helper()
	const fixed = `s3cr3t/+v=a&l"ue-<> \`
	b := make([]byte, len(fixed))
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	var v strings.Builder
	for i := range b {
		v.WriteByte(fixed[i])
		v.WriteByte('!' + b[i]%94) // '!' to '~'
	}
	return v.String()
}

func hsUint(t *testing.T) uint64 {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// hsForm is one encoding of a secret that must not leak; of a partial
// form, no hsWindow bytes may leak either.
type hsForm struct {
	secret, label, value string
	partial              bool
}

// hsWindow is how many consecutive bytes of a value make a partial leak.
const hsWindow = 16

// hsForms returns the forms of v to look for. Base64 is the characters
// that depend on v alone, whatever comes before (0, 1 or 2 bytes into a
// 3-byte group) or after it: every base64 text containing v has them.
func hsForms(name, v string) []hsForm {
	var out []hsForm
	seen := map[string]bool{}
	add := func(label, f string) {
		if !seen[f] {
			seen[f] = true
			partial := label == "the raw value" || strings.HasPrefix(label, "JSON string body (")
			out = append(out, hsForm{name, label, f, partial})
		}
	}
	add("the raw value", v)
	add("lower-case hex", hex.EncodeToString([]byte(v)))
	add("upper-case hex", strings.ToUpper(hex.EncodeToString([]byte(v))))
	add("url.QueryEscape", url.QueryEscape(v))
	add("url.PathEscape", url.PathEscape(v))
	for _, e := range []struct {
		name string
		enc  *base64.Encoding
	}{{"standard", base64.StdEncoding}, {"URL-safe", base64.URLEncoding}} {
		for k := range 3 {
			// v's bits are [8k, 8(k+len)); character j carries [6j, 6j+6).
			enc := e.enc.EncodeToString(append(make([]byte, k), v...))
			first, last := (8*k+5)/6, 8*(k+len(v))/6
			add(fmt.Sprintf("%s base64 (%d bytes before it)", e.name, k), enc[first:last])
		}
	}
	for _, html := range []bool{true, false} {
		once := hsJSONBody(v, html)
		add(fmt.Sprintf("JSON string body (HTML escaping %v)", html), once)
		for _, html2 := range []bool{true, false} {
			add(fmt.Sprintf("JSON string body escaped twice (HTML escaping %v, %v)", html, html2), hsJSONBody(once, html2))
		}
	}
	return out
}

// hsUnwrap is s without line breaks: the strings hsDecode wrote one a
// line joined, and wrapped base64 made one line.
func hsUnwrap(s string) []byte {
	return []byte(strings.NewReplacer("\n", "", "\r", "").Replace(s))
}

// hsJSONBody is s as encoding/json writes it inside a string, without the quotes.
func hsJSONBody(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// hsScan fails the test for every form found in data; if none is, for
// any hsWindow bytes of a partial form (a value cut short, then logged).
func hsScan(t *testing.T, where string, data []byte, forms []hsForm) {
	t.Helper()
	found := false
	for _, f := range forms {
		if i := bytes.Index(data, []byte(f.value)); i >= 0 {
			found = true
			t.Errorf("LEAK: %s of %s (%q) in %s at byte %d: ...%q...", f.label, f.secret, f.value, where, i, hsAround(data, i, len(f.value)))
		}
	}
	if found {
		return
	}
	for _, f := range forms {
		if f.partial {
			hsScanPartial(t, where, data, f)
		}
	}
}

// hsScanPartial reports each stretch of data that repeats hsWindow or
// more consecutive bytes of f.
func hsScanPartial(t *testing.T, where string, data []byte, f hsForm) {
	t.Helper()
	var seen [][2]int // reported stretches of data
	for i := 0; i+hsWindow <= len(f.value); i++ {
		w := []byte(f.value[i : i+hsWindow])
		for off := 0; ; {
			k := bytes.Index(data[off:], w)
			if k < 0 {
				break
			}
			j := off + k
			off = j + 1
			if slices.ContainsFunc(seen, func(r [2]int) bool { return r[0] <= j && j < r[1] }) {
				continue
			}
			n := hsWindow
			for i+n < len(f.value) && j+n < len(data) && data[j+n] == f.value[i+n] {
				n++
			}
			seen = append(seen, [2]int{j, j + n})
			t.Errorf("LEAK: %d of the %d bytes of %s of %s (%q, from byte %d) in %s at byte %d: ...%q...",
				n, len(f.value), f.label, f.secret, f.value, i, where, j, hsAround(data, j, n))
		}
	}
}

func hsAround(data []byte, i, n int) []byte {
	return data[max(0, i-80):min(len(data), i+n+40)]
}

func hsHasAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// hsTee keeps every byte of every HTTP response (headers and body) the
// client reads, before the SDK decodes anything.
type hsTee struct {
	next *http.Transport
	buf  lockedBuffer
}

func (h *hsTee) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	_ = resp.Header.Write(&h.buf)
	resp.Body = hsTeeBody{resp.Body, &h.buf}
	return resp, nil
}

func (h *hsTee) bytes() []byte { return []byte(h.buf.String()) }

type hsTeeBody struct {
	io.ReadCloser
	w io.Writer
}

func (b hsTeeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	_, _ = b.w.Write(p[:n])
	return n, err
}

// hsClient records, decoded, everything its handlers are given and every
// result its calls return.
type hsClient struct {
	mu   sync.Mutex
	seen []hsItem // guarded by mu
}

// hsItem is one thing the client got: its kind (a method, or "tools/call
// NAME") and every string in it.
type hsItem struct{ kind, text string }

func newHSClient() *hsClient { return &hsClient{} }

func (c *hsClient) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			c.record("sampling", req.Params)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.record("elicitation", req.Params)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
		LoggingMessageHandler:       func(_ context.Context, req *mcp.LoggingMessageRequest) { c.record("log", req.Params) },
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { c.record("progress", req.Params) },
	}
}

func (c *hsClient) record(kind string, v any) string {
	s := hsDecode(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, hsItem{kind, s})
	return s
}

func (c *hsClient) all() []hsItem {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

// text is everything recorded whose kind starts with prefix.
func (c *hsClient) text(prefix string) string {
	var all []string
	for _, it := range c.all() {
		if strings.HasPrefix(it.kind, prefix) {
			all = append(all, it.text)
		}
	}
	return strings.Join(all, "\n")
}

// hsDecode is every string in v (keys and values, as a client program
// would see them after decoding), one a line; errors give their text.
func hsDecode(v any) string {
	if err, ok := v.(error); ok {
		return err.Error()
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("(%T: %v)", v, err)
	}
	var x any
	if err := json.Unmarshal(raw, &x); err != nil {
		return fmt.Sprintf("(%T: %v)", v, err)
	}
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				out = append(out, k)
				walk(e)
			}
		}
	}
	walk(x)
	return strings.Join(out, "\n")
}

// hsExercise drives every feature behind sess: logging, every tool whose
// name starts with prefix (but those in skip, with a progress token),
// every resource and every prompt. It returns each tool's answer.
func hsExercise(t *testing.T, ctx context.Context, sess *mcp.ClientSession, c *hsClient, prefix string, skip ...string) map[string]string {
	t.Helper()
	c.record("initialize", sess.InitializeResult())
	if err := sess.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Errorf("logging/setLevel: %v", err)
	}
	var names []string
	for tool, err := range sess.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		c.record("tools/list", tool)
		if own, ok := strings.CutPrefix(tool.Name, prefix); ok && !slices.Contains(skip, own) {
			names = append(names, tool.Name)
		}
	}
	for _, want := range hsTools {
		if !slices.Contains(skip, want) && !slices.Contains(names, prefix+want) {
			t.Errorf("tools/list lacks %s%s: %v", prefix, want, names)
		}
	}
	answers := map[string]string{}
	for _, name := range names {
		answers[name] = hsCallText(t, ctx, sess, c, name)
	}
	for r, err := range sess.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		c.record("resources/list", r)
		res, err := sess.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI})
		if err != nil {
			t.Errorf("reading %s: %v", r.URI, err)
			continue
		}
		c.record("resources/read", res)
	}
	for p, err := range sess.Prompts(ctx, nil) {
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		c.record("prompts/list", p)
		res, err := sess.GetPrompt(ctx, &mcp.GetPromptParams{Name: p.Name})
		if err != nil {
			t.Errorf("getting prompt %s: %v", p.Name, err)
			continue
		}
		c.record("prompts/get", res)
	}
	return answers
}

// hsCallText calls a tool with a progress token and returns its answer
// decoded, or its error's text (rpc_error answers with one).
func hsCallText(t *testing.T, ctx context.Context, sess *mcp.ClientSession, c *hsClient, name string) string {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}
	p.SetProgressToken("progress-" + name)
	res, err := sess.CallTool(ctx, p)
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("calling %s: %v", name, err)
		}
		return c.record("tools/call "+name, err)
	}
	return c.record("tools/call "+name, res)
}

// hsServer is the config of one hostile server.
func hsServer(bin, name string, secrets map[string]any) map[string]any {
	s := map[string]any{
		"command": []string{"/opt/bin/hostile", "-name", name},
		"filesystem": map[string]any{
			"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}},
		},
		"tools": map[string]any{"allow": []string{"*"}},
	}
	if secrets != nil {
		s["secrets"] = secrets
	}
	return s
}

// hsWriteConfig writes a serve config (JSON is YAML) with its state dir
// at dir/state and returns its path.
func hsWriteConfig(t *testing.T, m mode, dir string, servers map[string]any) string {
	t.Helper()
	cfg := map[string]any{"version": 1, "state_dir": filepath.Join(dir, "state"), "servers": servers}
	if !m.root() {
		cfg["sandbox"] = map[string]any{"require": []string{"userns", "mountns", "pidns", "netns", "seccomp", "landlock", "idmap"}}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// hsProcs lists the processes whose command line contains nonce.
func hsProcs(t *testing.T, nonce string) []string {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(nonce)) {
			out = append(out, filepath.Base(filepath.Dir(p))+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
