package image_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"mcpbox/internal/image"
	"mcpbox/internal/sandbox"
)

// The test binary is the init of the sandboxes it starts.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}

// mcpServerLayer builds the e2e tests' MCP server static and returns a
// layer holding it at /usr/local/bin/mcpserver.
func mcpServerLayer(t *testing.T) v1.Layer {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain to build the MCP server: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "mcpserver")
	cmd := exec.Command(gobin, "build", "-o", bin, "../../test/e2e/testdata/mcpserver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the MCP server: %v\n%s", err, out)
	}
	body, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name string
		mode int64
		body []byte
	}{
		{"usr/", 0o755, nil}, {"usr/local/", 0o755, nil}, {"usr/local/bin/", 0o755, nil},
		{"usr/local/bin/mcpserver", 0o755, body},
		{"etc/", 0o755, nil}, {"etc/image-release", 0o644, []byte("from the image\n")},
		{"srv/", 0o755, nil},
	} {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestMCPServerFromImage pulls an image holding a static MCP server from
// a loopback registry and runs it with the image as the sandbox's root:
// it answers initialize and tools/list over stdio, and runs with the
// image's Cmd and Env (sandbox's TestImageRoot* show what of the host it
// does not see).
func TestMCPServerFromImage(t *testing.T) {
	img, err := mutate.AppendLayers(empty.Image, mcpServerLayer(t))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{
		Entrypoint: []string{"mcpserver"}, Cmd: []string{"-name", "from-image"},
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "IMAGE_VAR=set-by-image"}, WorkingDir: "/srv",
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/servers/echo:v1"
	nref, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(nref, img); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pulled, err := image.Pull(ctx, ref, image.Options{Store: filepath.Join(t.TempDir(), "images"), Insecure: true})
	if err != nil {
		t.Fatal(err)
	}

	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	spec := sandbox.Spec{
		Root: pulled.Root, Args: pulled.Config.Argv(nil), Env: pulled.Config.Env, Dir: pulled.Config.WorkingDir,
		AllowDegraded: []sandbox.Layer{sandbox.LayerCgroups}, Limits: sandbox.Limits{Timeout: 60 * time.Second},
	}
	type result struct {
		res *sandbox.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := sandbox.Run(ctx, spec, sandbox.Stdio{Stdin: stdinR, Stdout: stdoutW, Stderr: os.Stderr})
		stdoutW.Close()
		done <- result{res, err}
	}()
	lines := bufio.NewScanner(stdoutR)
	lines.Buffer(nil, 1<<20)
	call := func(id int, method string, params any) json.RawMessage {
		t.Helper()
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := stdinW.Write(append(msg, '\n')); err != nil {
			r := <-done
			var se *sandbox.StartError
			if errors.As(r.err, &se) && se.Layer == sandbox.LayerUserns {
				t.Skipf("no sandbox here: %v", r.err)
			}
			t.Fatalf("writing %s: %v (sandbox: %+v, %v)", method, err, r.res, r.err)
		}
		for lines.Scan() {
			var resp struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if json.Unmarshal(lines.Bytes(), &resp) == nil && resp.ID == id {
				if resp.Error != nil {
					t.Fatalf("%s: error %s", method, resp.Error)
				}
				return resp.Result
			}
		}
		t.Fatalf("%s: no answer (%v)", method, lines.Err())
		return nil
	}
	call(1, "initialize", map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "image-test", "version": "1"},
	})
	note, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	stdinW.Write(append(note, '\n'))
	var tools struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(call(2, "tools/list", map[string]any{}), &tools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(" "+strings.Join(names, " ")+" ", " whoami ") {
		t.Fatalf("tools/list: %q, want whoami among them", names)
	}
	text := func(id int, tool string, args map[string]any) string {
		var r struct {
			Content []struct{ Text string } `json:"content"`
		}
		if err := json.Unmarshal(call(id, "tools/call", map[string]any{"name": tool, "arguments": args}), &r); err != nil || len(r.Content) == 0 {
			t.Fatalf("%s: %v %+v", tool, err, r)
		}
		return r.Content[0].Text
	}
	if got := text(3, "whoami", map[string]any{}); got != "from-image" {
		t.Errorf("whoami = %q, want the image's Cmd argument", got)
	}
	if got := text(4, "getenv", map[string]any{"text": "IMAGE_VAR"}); got != "set-by-image" {
		t.Errorf("IMAGE_VAR = %q, want the image's Env", got)
	}
	stdinW.Close()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("sandbox: %v", r.err)
		}
	case <-ctx.Done():
		t.Fatal("the server did not exit after stdin closed")
	}
}
