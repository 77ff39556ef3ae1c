package specconv

import (
	"slices"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/image"
	"mcpbox/internal/sandbox"
)

func TestApplyImage(t *testing.T) {
	img := &image.Image{Root: "/state/images/rootfs/abc", Config: image.Config{
		Entrypoint: []string{"/srv"}, Cmd: []string{"--default"},
		Env:        []string{"PATH=/opt/bin:/usr/bin", "HOME=/root", "LOG=image", "BAD"},
		WorkingDir: "app", User: "1000:1000",
	}}
	s := &config.Server{Name: "gh", Image: config.ImageSource{Ref: "r/x:v1"}}
	spec := sandbox.Spec{Env: []string{"LOG=config"}}
	if err := ApplyImage(&spec, s, img); err != nil {
		t.Fatal(err)
	}
	if spec.Root != img.Root || !slices.Equal(spec.Args, []string{"/srv", "--default"}) || spec.Dir != "/app" {
		t.Errorf("root %q args %q dir %q", spec.Root, spec.Args, spec.Dir)
	}
	// The config's env comes last, so it wins; HOME is the sandbox's.
	if want := []string{"PATH=/opt/bin:/usr/bin", "LOG=image", "LOG=config"}; !slices.Equal(spec.Env, want) {
		t.Errorf("env %q, want %q", spec.Env, want)
	}
	s.Args = []string{"stdio"}
	spec = sandbox.Spec{}
	if err := ApplyImage(&spec, s, img); err != nil || !slices.Equal(spec.Args, []string{"/srv", "stdio"}) {
		t.Errorf("args replace Cmd: %q, %v", spec.Args, err)
	}
	s.Args = nil
	err := ApplyImage(&sandbox.Spec{}, s, &image.Image{Root: "/r"})
	if err == nil || !strings.Contains(err.Error(), "server gh: image r/x:v1 has no Entrypoint or Cmd") {
		t.Errorf("empty argv: %v", err)
	}
}
