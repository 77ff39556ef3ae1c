package importer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/config"
)

// dockerEntry imports one server whose command is cmd with args.
func dockerEntry(t *testing.T, cmd string, args []string, env map[string]string) (*Result, string) {
	t.Helper()
	ent := map[string]any{"command": cmd, "args": args}
	if env != nil {
		ent["env"] = env
	}
	raw, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"srv": ent}})
	cf, err := ParseClientFile("client.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	out := ""
	if len(res.Config.Servers) > 0 {
		b, err := Render(res, "client.json")
		if err != nil {
			t.Fatalf("rendering: %v", err)
		}
		out = string(b)
	}
	return res, out
}

func TestImportDockerRun(t *testing.T) {
	res, out := dockerEntry(t, "docker", []string{"run", "-i", "--rm", "-e", "GITHUB_TOKEN", "-e", "LOG_LEVEL=debug", "-e", "FROM_ENTRY",
		"-v", "/srv/data:/data:ro", "-v", "/home/me/out:/out", "--mount", "type=bind,source=/opt/x,target=/x,readonly",
		"-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", "/:/host", "-v", "~/.ssh:/ssh", "-v", "cache:/cache",
		"--platform", "linux/arm64", "--cap-add", "SYS_ADMIN", "--network", "host",
		"ghcr.io/org/srv:v1", "stdio", "--api-key=ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"},
		map[string]string{"FROM_ENTRY": "plain", "UNPASSED": "x"})
	if len(res.Config.Servers) != 1 {
		t.Fatalf("not imported: %q", res.Notes)
	}
	want := &config.Server{
		Name: "srv", Image: config.ImageSource{Ref: "ghcr.io/org/srv:v1", Platform: "linux/arm64"},
		Args: []string{"stdio", "--api-key=REDACTED"},
		Filesystem: config.Filesystem{Output: &config.Output{}, Mounts: []config.Mount{
			{Source: "/srv/data", Target: "/data", Mode: "ro"}, {Source: "/home/me/out", Target: "/out", Mode: "rw"},
			{Source: "/opt/x", Target: "/x", Mode: "ro"}}},
		Env:     []config.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}, {Name: "FROM_ENTRY", Value: "plain"}},
		Secrets: []config.Secret{{Name: "GITHUB_TOKEN", From: "env:GITHUB_TOKEN"}},
		Tools:   config.Tools{Allow: []string{"*"}},
	}
	if d := cmp.Diff(want, res.Config.Servers[0], ignorePos); d != "" {
		t.Errorf("server (-want +got):\n%s", d)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, s := range []string{"docker flag --cap-add is dropped", "env UNPASSED is not passed", "argument 2 held a credential",
		"mount /var/run/docker.sock left out: the container daemon's socket is root on the host"} {
		if !strings.Contains(notes, s) {
			t.Errorf("notes lack %q:\n%s", s, notes)
		}
	}
	for _, s := range []string{"# -v /var/run/docker.sock:/var/run/docker.sock left out: the container daemon's socket",
		"# -v /:/host left out: / holds the host's system", "# -v ~/.ssh:/ssh left out: ~/.ssh holds credentials",
		"# -v cache:/cache left out: a named docker volume", "# --network host: the sandbox has no network",
		"image: ghcr.io/org/srv:v1"} {
		if !strings.Contains(out, s) {
			t.Errorf("YAML lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "docker.sock\n") || strings.Contains(out, "target: /host") {
		t.Errorf("a protected mount made it into the config:\n%s", out)
	}
}

func TestImportDockerRunVariants(t *testing.T) {
	// podman, "container run", combined short flags, a loopback registry.
	res, _ := dockerEntry(t, "/usr/bin/podman", []string{"container", "run", "-it", "--rm", "127.0.0.1:5000/t/mcp:v1"}, nil)
	if len(res.Config.Servers) != 1 {
		t.Fatalf("not imported: %q", res.Notes)
	}
	if s := res.Config.Servers[0]; s.Image != (config.ImageSource{Ref: "127.0.0.1:5000/t/mcp:v1", Insecure: true}) || s.Args != nil {
		t.Errorf("got %+v args %q", s.Image, s.Args)
	}
	for _, tc := range []struct {
		args []string
		note string
	}{
		{[]string{"run", "-i", "--entrypoint", "/bin/sh", "img"}, "--entrypoint replaces the image's Entrypoint"},
		{[]string{"run", "-d", "img"}, "-d runs the container detached"},
		{[]string{"run", "--env-file", "x.env", "img"}, "--env-file reads variables from a file"},
		{[]string{"run", "--frobnicate", "img"}, "flag --frobnicate is not understood"},
		{[]string{"run", "-i", "--rm"}, "no image named"},
		{[]string{"run", "-e", "A B", "img"}, "-e A B: not a variable name"},
	} {
		res, _ := dockerEntry(t, "docker", tc.args, nil)
		if len(res.Config.Servers) != 0 || !strings.Contains(strings.Join(res.Notes, "\n"), tc.note) {
			t.Errorf("%q: servers %d, notes %q; want skipped with %q", tc.args, len(res.Config.Servers), res.Notes, tc.note)
		}
	}
	// Other docker commands are left as they are.
	res, _ = dockerEntry(t, "docker", []string{"exec", "-i", "box", "srv"}, nil)
	if len(res.Config.Servers) != 1 || res.Config.Servers[0].Command == nil {
		t.Errorf("docker exec: %+v", res.Config.Servers)
	}
}

// TestProtectedSource: a client's mount or path argument that would show
// the host's system, credentials or runtime dirs is not carried over.
func TestProtectedSource(t *testing.T) {
	for src, bad := range map[string]bool{
		"/var/run/docker.sock": true, "/run/docker.sock": true, "/run/user/1000/podman/podman.sock": true,
		"/run/containerd/containerd.sock": true, "/": true, "/etc": true, "/etc/": true, "~": true, "$HOME/.ssh": true,
		"${HOME}/.aws/credentials": true, "/proc/1": true, "/root/x": true, "/home": true, "vol": true,
		"/home/me/project": false, "./data": true, "../../.ssh": true, "..": true, ".": true, "~/notes": false, "/srv/data": false, "/etc/ssl/certs": false,
		// A home named absolutely, as JSON configs must.
		"/home/alice": true, "/home/alice/": true, "/home/alice/.ssh": true, "/home/alice/.aws/credentials": true,
		"/Users/bob": true, "/Users/bob/.kube/config": true, "/Users": true, "/Users/bob/code": false,
		"/Users/bob/.SSH": true, "$HOME/..": true, "~/../bob/.ssh": true, "~/../../etc": true,
		// Any hidden entry of a home: tokens and keys no list names.
		"~/.netrc": true, "/home/alice/.git-credentials": true, "~/.password-store": true, "~/.mozilla/firefox": true,
		"~/.local/share/keyrings": true, "~/.config": true, "/Users/bob/.config/gh": true, "~/src/.cache": false,
		// The runtime dirs: the buses' sockets, service dirs that run code.
		"/run/user/1000": true, "/run/user/1000/dbus-1/services": true, "/var/run/user/1000": true, "/run/systemd/system": true,
		"/run/dbus": true, "/run/media/alice/stick": false, "/var/run/dbus/system_bus_socket": true, "/var/run/systemd/private": true,
		"/var/run/containerd": true,
		// A dir holding a protected tree.
		"/var/lib": true,
	} {
		if got := protectedSource(src) != ""; got != bad {
			t.Errorf("protectedSource(%q) = %q, want protected %v", src, protectedSource(src), bad)
		}
	}
	// The user's own home, wherever it is, as ~; and the homes of Fedora's
	// image-based systems.
	for src, bad := range map[string]bool{
		"/srv/u/alice": true, "/srv/u/alice/": true, "/srv/u/alice/.ssh": true, "/srv/u/alice/.aws/credentials": true,
		"/srv/u/alice/.SSH": true, "/srv/u/alice/code": false, "/srv/u/alicex/.ssh": false, "/srv/u": false,
		"/var/home/bob": true, "/var/home/bob/.kube/config": true, "/var/home": true, "/var/home/bob/code": false,
		"/link/alice/.ssh": true, "/link/alice": true, "/link/alice/code": false,
	} {
		if got := protectedSource(src, "/link/alice", "/srv/u/alice/"); (got != "") != bad {
			t.Errorf("protectedSource(%q) with home /srv/u/alice = %q, want protected %v", src, got, bad)
		}
	}
	if got := protectedSource("/x/.ssh", "/"); got != "" {
		t.Errorf("a home of / protects everything under it: %q", got)
	}
}

// TestImportNotesHostPaths: a local server that names host paths gets a
// note (the terminal's), not only the comment in the config: it cannot
// start until they are mounted. One without does not.
func TestImportNotesHostPaths(t *testing.T) {
	res, _ := dockerEntry(t, "node", []string{"/srv/npm/server/index.js", "/srv/data"}, nil)
	want := `server "srv" names host paths its sandbox does not see ("/srv/npm/server/index.js", "/srv/data")`
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, want) {
		t.Errorf("notes %q lack %q", notes, want)
	}
	res, _ = dockerEntry(t, "node", []string{"/workspace/input/index.js"}, nil)
	if notes := strings.Join(res.Notes, "\n"); strings.Contains(notes, "host paths") {
		t.Errorf("notes of a server with no host path: %q", notes)
	}
}
