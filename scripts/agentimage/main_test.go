package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"mcpbox/internal/image"
)

// TestAgentImage builds the image of a small static program, pushes it
// to a loopback registry, and pulls it back with mcpbox's own puller:
// the one file is the binary, byte for byte, mode 0555, at AgentPath, it
// runs, and the config names user 65532 and the entrypoint. A second
// build has the same digest, the OCI layout holds it, and a dynamic
// binary is refused.
func TestAgentImage(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"agent ok\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "mcpbox")
	build := exec.Command("go", "build", "-o", bin, src)
	build.Dir = dir // outside the module: a single file of the standard library
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test binary: %v\n%s", err, out)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/mcpbox-agent:v1"
	digest, err := run(bin, ref, "", true)
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Pull(context.Background(), ref, image.Options{Store: filepath.Join(dir, "store"), Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if img.Digest != digest || len(img.Layers) != 1 || img.Config.User != "65532:65532" || !slices.Equal(img.Config.Entrypoint, []string{AgentPath}) {
		t.Errorf("pulled %s (pushed %s): layers %v config %+v", img.Digest, digest, img.Layers, img.Config)
	}
	got, err := os.ReadFile(filepath.Join(img.Root, AgentPath))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(bin)
	if !bytes.Equal(got, want) {
		t.Error("the image's mcpbox is not the binary")
	}
	if st, err := os.Stat(filepath.Join(img.Root, AgentPath)); err != nil || st.Mode().Perm() != 0o555 {
		t.Errorf("the image's mcpbox: %v %v, want mode 0555", st.Mode(), err)
	}
	if out, err := exec.Command(filepath.Join(img.Root, AgentPath)).CombinedOutput(); err != nil || string(out) != "agent ok\n" {
		t.Errorf("running the image's mcpbox: %q %v", out, err)
	}
	var files []string
	_ = filepath.WalkDir(img.Root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, strings.TrimPrefix(p, img.Root))
		}
		return nil
	})
	if !slices.Equal(files, []string{AgentPath}) {
		t.Errorf("the image holds %q, want only %s", files, AgentPath)
	}

	oci := filepath.Join(dir, "oci")
	again, err := run(bin, "", oci, false)
	if err != nil || again != digest {
		t.Fatalf("a second build: %s %v, want the digest %s", again, err, digest)
	}
	p, err := layout.FromPath(oci)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 || m.Manifests[0].Digest.String() != digest {
		t.Errorf("the layout's index: %+v %v", m, err)
	}

	if _, err := run("/bin/sh", "", filepath.Join(dir, "oci2"), false); err == nil || !strings.Contains(err.Error(), "not static") {
		t.Errorf("a dynamic binary: %v, want it refused as not static", err)
	}
}
