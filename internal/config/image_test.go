package config

import (
	"slices"
	"testing"
)

// TestImageServer loads an image server and prints it back.
func TestImageServer(t *testing.T) {
	src := "version: 1\nservers:\n  gh:\n    image: 127.0.0.1:5000/org/srv:v1\n    image_insecure: true\n    image_platform: linux/arm64\n    args: [stdio, --read-only]\n"
	c, err := Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Servers[0]
	want := ImageSource{Ref: "127.0.0.1:5000/org/srv:v1", Insecure: true, Platform: "linux/arm64"}
	if s.Image != want || !slices.Equal(s.Args, []string{"stdio", "--read-only"}) {
		t.Fatalf("got image %+v args %q", s.Image, s.Args)
	}
	c2, out := reload(t, c)
	if c2.Servers[0].Image != want || !slices.Equal(c2.Servers[0].Args, s.Args) {
		t.Fatalf("round trip lost the image: %s", out)
	}
	for _, ok := range []string{"alpine", "ghcr.io/o/s:v1@sha256:" + hex64, "localhost:5000/s", "[::1]:5000/s:v1"} {
		if _, err := Load("t.yaml", []byte("version: 1\nservers:\n  s:\n    image: \""+ok+"\"\n    image_insecure: "+boolStr(ok != "alpine" && ok[0] != 'g')+"\n")); err != nil {
			t.Errorf("image %s: %v", ok, err)
		}
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestImageServerInvalid checks every refusal and its position.
func TestImageServerInvalid(t *testing.T) {
	const img = "version: 1\nservers:\n  s:\n    image: ghcr.io/o/s:v1\n"
	tests := []struct{ name, yaml, want string }{
		{"with command", img + "    command: [x]\n", `t.yaml:4:12: servers.s: image and command are exclusive`},
		{"with url", img + "    url: https://x.example/mcp\n", `t.yaml:4:12: servers.s: image and url are exclusive (an image runs in a local sandbox)`},
		{"with builtin", img + "    builtin: workspace\n", `t.yaml:4:12: servers.s: image and builtin are exclusive`},
		{"empty", "version: 1\nservers:\n  s:\n    image: \"\"\n", `t.yaml:4:12: servers.s.image: must not be empty (want REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:DIGEST)`},
		{"space", "version: 1\nservers:\n  s:\n    image: \"a b\"\n", `t.yaml:4:12: servers.s.image: "a b" must not contain whitespace`},
		{"scheme", "version: 1\nservers:\n  s:\n    image: https://ghcr.io/o/s\n", `t.yaml:4:12: servers.s.image: "https://ghcr.io/o/s": an image reference has no scheme (want e.g. ghcr.io/org/server:v1)`},
		{"short digest", "version: 1\nservers:\n  s:\n    image: ghcr.io/o/s@sha256:abc\n", `t.yaml:4:12: servers.s.image: "ghcr.io/o/s@sha256:abc": the digest must be sha256: and 64 lowercase hex digits`},
		{"upper case", "version: 1\nservers:\n  s:\n    image: ghcr.io/Org/S:v1\n", `t.yaml:4:12: servers.s.image: "ghcr.io/Org/S:v1" is no image reference the puller reads (want lower-case REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:DIGEST)`},
		{"two tags", "version: 1\nservers:\n  s:\n    image: ghcr.io/o/s:v1:v2\n", `t.yaml:4:12: servers.s.image: "ghcr.io/o/s:v1:v2" is no image reference the puller reads (want lower-case REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:DIGEST)`},
		{"insecure remote", img + "    image_insecure: true\n", `t.yaml:5:21: servers.s.image_insecure: plain HTTP is allowed to a loopback registry only (localhost, 127.0.0.1, [::1]), not ghcr.io`},
		{"insecure hub", "version: 1\nservers:\n  s:\n    image: org/x\n    image_insecure: true\n", `t.yaml:5:21: servers.s.image_insecure: plain HTTP is allowed to a loopback registry only (localhost, 127.0.0.1, [::1]), not docker.io`},
		{"insecure private", "version: 1\nservers:\n  s:\n    image: 10.0.0.1:5000/x\n    image_insecure: true\n", `t.yaml:5:21: servers.s.image_insecure: plain HTTP is allowed to a loopback registry only (localhost, 127.0.0.1, [::1]), not 10.0.0.1:5000`},
		{"platform", img + "    image_platform: arm64\n", `t.yaml:5:21: servers.s.image_platform: "arm64": want os/arch[/variant], e.g. linux/arm64`},
		{"insecure without image", "version: 1\nservers:\n  s:\n    command: [x]\n    image_insecure: true\n", `t.yaml:5:21: servers.s.image_insecure: only applies to an image server (image: REF)`},
		{"args without image", "version: 1\nservers:\n  s:\n    command: [x]\n    args: [y]\n", `t.yaml:5:11: servers.s.args: args replace an image's Cmd; a command takes its arguments in the command list`},
		{"group", img + "    placement: group:g\n", `t.yaml:5:16: servers.s.placement: an image server runs in a sandbox of its own (its image is the sandbox's root)`},
		{"args NUL", img + "    args: [\"a\\0b\"]\n", `t.yaml:5:12: servers.s.args[0]: must not contain NUL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte(tt.yaml))
			es := AsErrors(err)
			if len(es) == 0 {
				t.Fatalf("Load error %v, want %q", err, tt.want)
			}
			if got := es[0].Error(); got != tt.want {
				t.Errorf("first error:\n got %s\nwant %s\nall:\n%v", got, tt.want, err)
			}
		})
	}
}
