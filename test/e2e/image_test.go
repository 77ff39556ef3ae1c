package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
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
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// imRegistry is go-containerregistry's registry, in this process, on
// loopback; mcpbox reaches it over plain HTTP (image_insecure).
func imRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// imImage is an image of the static test MCP server at
// /usr/local/bin/mcpserver, run with -name serverName, plus a file of
// its own in /etc.
func imImage(t *testing.T, serverName string) v1.Image {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(goBuild(t, gwServerPkg), "mcpserver"))
	if err != nil {
		t.Fatal(err)
	}
	return imBuild(t, []imEntry{
		{"usr/", "", nil}, {"usr/local/", "", nil}, {"usr/local/bin/", "", nil}, {"usr/local/bin/mcpserver", "", body},
		{"etc/", "", nil}, {"etc/image-release", "", []byte(serverName + "\n")}, {"app/", "", nil},
	}, v1.Config{
		Entrypoint: []string{"mcpserver"}, Cmd: []string{"-name", serverName},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "IMAGE_VAR=set-by-image", "HOME=/root"},
		WorkingDir: "/app", User: "1000",
	})
}

// imEntry is one file of an image's single layer: a directory when name
// ends in "/", a symlink to link when link is set, else a regular file
// (mode 0755) holding body.
type imEntry struct {
	name, link string
	body       []byte
}

// imBuild is a linux image of the host's architecture with one layer of
// entries and the config cfg.
func imBuild(t *testing.T, entries []imEntry, cfg v1.Config) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		switch {
		case strings.HasSuffix(e.name, "/"):
			h.Typeflag = tar.TypeDir
		case e.link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.link, 0o777
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
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// imPush pushes img as ref and returns its digest.
func imPush(t *testing.T, ref string, img v1.Image) string {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// imServe runs `mcpbox serve --stdio --config cfg` as an MCP client's
// command and returns the session and mcpbox's stderr.
func imServe(t *testing.T, m mode, cfg string, env ...string) (*mcp.ClientSession, *gwLog) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := m.command(ctx, "serve", "--stdio", "--config", cfg)
	cmd.Env = append(cmd.Env, env...)
	logs := newGWLog()
	cmd.Stderr = logs
	cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
	defer ccancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "image-e2e", Version: "1"}, nil)
	sess, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		cancel()
		gwReap(cmd)
		t.Fatalf("connecting to mcpbox serve --stdio: %v\nstderr:\n%s", err, logs)
	}
	t.Cleanup(func() {
		gwClose(t, sess)
		cancel()
		gwReap(cmd)
		if t.Failed() {
			t.Logf("mcpbox serve stderr:\n%s", logs)
		}
	})
	return sess, logs
}

// imConfig writes a config whose one server, img, is the image ref.
func imConfig(t *testing.T, m mode, dir, ref string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nstate_dir: %q\n", filepath.Join(dir, "state"))
	if !m.root() {
		b.WriteString("sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n")
	}
	fmt.Fprintf(&b, "servers:\n  img:\n    image: %q\n    image_insecure: true\n    tools: {allow: ['*']}\n", ref)
	cfg := filepath.Join(dir, "mcpbox.yaml")
	m.writeFile(t, cfg, b.String(), 0o644)
	return cfg
}

// imLockDigest is the digest mcpbox.lock beside cfg pins for server.
func imLockDigest(t *testing.T, cfg, server string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(cfg), "mcpbox.lock"))
	if err != nil {
		t.Fatalf("reading the lock file: %v", err)
	}
	var lf struct {
		Images map[string]struct{ Digest, Ref string }
	}
	if err := json.Unmarshal(raw, &lf); err != nil {
		t.Fatalf("lock file: %v\n%s", err, raw)
	}
	return lf.Images[server].Digest
}

// TestImageServer: an image server pulled from a loopback registry runs
// over `serve --stdio` with the image as its system view (the host's
// /usr is not there), its digest is pinned, the second start downloads
// nothing, and once the tag points to other bytes the next start is
// refused until `mcpbox update` pins the new image.
func TestImageServer(t *testing.T) {
	host := imRegistry(t)
	if _, err := os.Stat("/usr/bin/env"); err != nil {
		t.Fatalf("the host has no /usr/bin/env to look for: %v", err)
	}
	forEachMode(t, func(t *testing.T, m mode) {
		ref := host + "/test/mcp-" + m.name + ":v1"
		first := imPush(t, ref, imImage(t, "from-image"))
		dir := m.dir(t)
		cfg := imConfig(t, m, dir, ref)

		sess, logs := imServe(t, m, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		tools := gwToolNames(t, ctx, sess)
		if !tools["whoami"] || !tools["stat"] {
			t.Fatalf("tools/list: %v", tools)
		}
		gwMustCall(t, sess, "whoami", nil, "from-image")
		for path, want := range map[string]string{
			"/usr/bin/env": "missing", "/usr/local/bin/mcpserver": "file", "/etc/image-release": "file",
			"/workspace": "dir", "/root": "missing",
		} {
			gwMustCall(t, sess, "stat", map[string]any{"text": path}, want)
		}
		for k, want := range map[string]string{"IMAGE_VAR": "set-by-image", "HOME": "/tmp/home", "HTTPS_PROXY": "", "https_proxy": ""} {
			// No proxy: the server has no network at run time.
			if got, err := gwCall(ctx, sess, "getenv", map[string]any{"text": k}); err != nil || got != want {
				t.Errorf("getenv %s = %q, %v; want %q", k, got, err, want)
			}
		}
		if !strings.Contains(logs.String(), "fetching layer 1/1") || !strings.Contains(logs.String(), "pinned image "+ref+" at "+first) {
			t.Errorf("the first start said nothing of the pull and the pin:\n%s", logs)
		}
		gwClose(t, sess)
		if got := imLockDigest(t, cfg, "img"); got != first {
			t.Fatalf("mcpbox.lock pins %q, want %s", got, first)
		}

		// The second start runs the pinned image, downloading nothing.
		sess, logs = imServe(t, m, cfg)
		gwMustCall(t, sess, "whoami", nil, "from-image")
		if strings.Contains(logs.String(), "fetching layer") {
			t.Errorf("the second start downloaded layers again:\n%s", logs)
		}
		gwClose(t, sess)

		// pin --check of a config that now names another image fails,
		// naming both: the lock pins the first.
		ref2 := host + "/test/mcp-" + m.name + "-other:v1"
		imPush(t, ref2, imImage(t, "other"))
		orig, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m.writeFile(t, cfg, strings.Replace(string(orig), ref, ref2, 1), 0o644)
		r := m.mcpbox(t, 120*time.Second, "", "pin", "--check", "--config", cfg)
		if r.code != 1 || !strings.Contains(r.stdout, "image of img: "+ref2+" (") || !strings.Contains(r.stdout, "is not pinned: the lock pins "+ref+" (") {
			t.Errorf("pin --check of another image: want exit 1 naming both:\n%s", r)
		}
		m.writeFile(t, cfg, string(orig), 0o644)
		if got := imLockDigest(t, cfg, "img"); got != first {
			t.Fatalf("pin --check changed the pin to %q", got)
		}

		// Re-tagged to other bytes: refused, naming both digests.
		second := imPush(t, ref, imImage(t, "retagged"))
		r = m.mcpbox(t, 60*time.Second, "", "serve", "--stdio", "--config", cfg)
		want := fmt.Sprintf("server img: image %s now points to %s, but mcpbox.lock pins %s", ref, second, first)
		if r.code == 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "mcpbox update img") {
			t.Fatalf("a start after the re-tag: want refused with %q:\n%s", want, r)
		}
		if got := imLockDigest(t, cfg, "img"); got != first {
			t.Fatalf("the refused start changed the pin to %q", got)
		}
		imUpdate(t, m, cfg, first, second)
	})
}

// imUpdate runs `mcpbox update img`: it shows the digests and the tool
// definitions the new image changes, then pins it; the next start runs
// the new image.
func imUpdate(t *testing.T, m mode, cfg, first, second string) {
	t.Helper()
	r := m.mcpbox(t, 120*time.Second, "", "update", "--check", "--config", cfg, "img")
	if r.code != 1 || !strings.Contains(r.stdout, first+" -> "+second) {
		t.Fatalf("update --check: want exit 1 and %s -> %s:\n%s", first, second, r)
	}
	if got := imLockDigest(t, cfg, "img"); got != first {
		t.Fatalf("update --check changed the pin to %q", got)
	}
	r = m.mcpbox(t, 120*time.Second, "", "update", "--config", cfg, "img")
	if r.code != 0 || !strings.Contains(r.stdout, first+" -> "+second) || !strings.Contains(r.stdout, "pinned img") {
		t.Fatalf("update:\n%s", r)
	}
	if got := imLockDigest(t, cfg, "img"); got != second {
		t.Fatalf("after update the lock pins %q, want %s", got, second)
	}
	sess, _ := imServe(t, m, cfg)
	gwMustCall(t, sess, "whoami", nil, "retagged")
	r = m.mcpbox(t, 60*time.Second, "", "update", "--config", cfg, "img")
	if r.code != 0 || !strings.Contains(r.stdout, "up to date") {
		t.Errorf("update with nothing new:\n%s", r)
	}
}

// TestImageImportDockerRun: a Claude Desktop entry `docker run -i --rm
// -e VAR IMAGE ARGS`, imported, serves the image with ARGS and the
// variable as a secret from the host's environment.
func TestImageImportDockerRun(t *testing.T) {
	host := imRegistry(t)
	forEachMode(t, func(t *testing.T, m mode) {
		ref := host + "/test/imported-" + m.name + ":v1"
		imPush(t, ref, imImage(t, "default-name"))
		dir := m.dir(t)
		in := filepath.Join(dir, "claude_desktop_config.json")
		m.writeFile(t, in, fmt.Sprintf(`{"mcpServers": {"boxed": {"command": "docker",
			"args": ["run", "-i", "--rm", "-e", "IMAGE_TOKEN", "-v", "/var/run/docker.sock:/var/run/docker.sock", %q, "-name", "imported"]}}}`, ref), 0o644)
		r := defaultRun(t, m, dir, "", "import", in)
		if r.code != 0 || !strings.Contains(r.stdout, "image: "+ref) || !strings.Contains(r.stdout, "docker.sock:/var/run/docker.sock left out") {
			t.Fatalf("import:\n%s", r)
		}
		// What a person adds: a state dir and (unprivileged, without
		// cgroups) the layers to require.
		extra := fmt.Sprintf("state_dir: %q\n", filepath.Join(dir, "state"))
		if !m.root() {
			extra += "sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n"
		}
		yml := strings.Replace(r.stdout, "\nversion: 1\n", "\nversion: 1\n"+extra, 1)
		if strings.Contains(yml, "docker.sock\n") || !strings.Contains(yml, extra) {
			t.Fatalf("imported YAML:\n%s", yml)
		}
		cfg := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfg, yml, 0o644)
		token := "tok-" + gwHex(8)
		sess, _ := imServe(t, m, cfg, "IMAGE_TOKEN="+token)
		gwMustCall(t, sess, "whoami", nil, "imported")
		// The secret reaches the server; the gateway redacts it on the
		// way back.
		got, err := gwCall(context.Background(), sess, "getenv", map[string]any{"text": "IMAGE_TOKEN"})
		if err != nil || got == "" || strings.Contains(got, token) {
			t.Errorf("getenv IMAGE_TOKEN through the gateway = %q, %v; want a redacted value", got, err)
		}
		gwMustCall(t, sess, "stat", map[string]any{"text": "/var/run/docker.sock"}, "missing")
	})
}

// TestImageHostileLayerRefused: an image whose layer writes outside its
// root is refused at start, with an error naming the server, and nothing
// lands outside.
func TestImageHostileLayerRefused(t *testing.T) {
	host := imRegistry(t)
	forEachMode(t, func(t *testing.T, m mode) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, n := range []string{"usr/", "../../../../../../tmp/mcpbox-image-escape-" + m.name} {
			h := &tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg, Size: 1}
			if strings.HasSuffix(n, "/") {
				h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
			}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if h.Size == 1 {
				tw.Write([]byte("x"))
			}
		}
		tw.Close()
		b := buf.Bytes()
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		if err != nil {
			t.Fatal(err)
		}
		img, err := mutate.AppendLayers(empty.Image, layer)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Config.Cmd = "linux", runtime.GOARCH, []string{"/x"}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		ref := host + "/test/hostile-" + m.name + ":v1"
		imPush(t, ref, img)
		escape := "/tmp/mcpbox-image-escape-" + m.name
		os.Remove(escape)
		cfg := imConfig(t, m, m.dir(t), ref)
		r := m.mcpbox(t, 60*time.Second, "", "serve", "--stdio", "--config", cfg)
		if r.code == 0 || !strings.Contains(r.stderr, "server img: ") || !strings.Contains(r.stderr, "hostile layer") {
			t.Errorf("serve of a hostile image: want refused naming the server and the hostile layer:\n%s", r)
		}
		if _, err := os.Lstat(escape); err == nil {
			os.Remove(escape)
			t.Errorf("the hostile layer wrote %s", escape)
		}
	})
}

// TestImageForeignPlatformRefused: an image server whose image_platform
// this host cannot run (no binfmt_misc handler) is refused before its
// image is pulled or pinned, naming the platform; it was pinned, then
// failed to start with "exec format error".
func TestImageForeignPlatformRefused(t *testing.T) {
	if _, err := os.Stat("/proc/sys/fs/binfmt_misc/qemu-s390x"); err == nil {
		t.Skip("this host runs s390x programs (binfmt_misc)")
	}
	m := mode{name: "root", uid: -1}
	dir := m.dir(t)
	cfg := filepath.Join(dir, "mcpbox.yaml")
	m.writeFile(t, cfg, fmt.Sprintf(`version: 1
state_dir: %q
servers:
  s:
    image: 127.0.0.1:9/test/none:v1
    image_insecure: true
    image_platform: linux/s390x
    args: [/srv]
    tools: {allow: ["*"]}
`, filepath.Join(dir, "state")), 0o644)
	r := m.mcpbox(t, 60*time.Second, dir, "pin", "--config", cfg)
	if r.code == 0 || !strings.Contains(r.stderr, "server s: image_platform: platform linux/s390x is not this host's") {
		t.Errorf("mcpbox pin of an s390x image: %s; want a refusal naming the platform", r)
	}
	if lock, _ := os.ReadFile(filepath.Join(dir, "mcpbox.lock")); strings.Contains(string(lock), "images") {
		t.Errorf("the refused image was pinned:\n%s", lock)
	}
	if r := m.mcpbox(t, 60*time.Second, dir, "update", "--config", cfg, "s"); r.code == 0 || !strings.Contains(r.stderr, "platform linux/s390x is not this host's") {
		t.Errorf("mcpbox update of an s390x image: %s; want the same refusal", r)
	}
}
