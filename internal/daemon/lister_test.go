package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"mcpbox/internal/config"
)

// TestListerLeavesOutFailedPackage: a server whose package does not
// install (the registry answers 404, as registry.npmjs.org does for a
// typo) does not stop mcpbox pin from starting the others: the Lister is
// built without it, and its Definitions are why. A group member's
// failure still fails the Lister (the group's sandbox is built for all
// its members), and so does a config of which no server is left.
func TestListerLeavesOutFailedPackage(t *testing.T) {
	reg := httptest.NewServer(http.NotFoundHandler())
	defer reg.Close()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("NPM_CONFIG_USERCONFIG", "")
	t.Setenv("npm_config_registry", "")
	t.Setenv("NPM_CONFIG_REGISTRY", reg.URL+"/")
	lister := func(yaml string) (*Lister, error) {
		t.Helper()
		c, err := config.Load("mcpbox.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		return NewLister(ListOptions{Config: c, ConfigPath: filepath.Join(dir, "mcpbox.yaml"), Base: dir,
			StateDir: t.TempDir(), NoRecord: true})
	}

	l, err := lister(`version: 1
servers:
  typo:
    command: [npx, -y, "@x/not-published"]
    tools: {allow: ["*"]}
  good:
    command: [sh, -c, "sleep 1"]
    tools: {allow: ["*"]}
`)
	if err != nil {
		t.Fatalf("NewLister with one package that does not install: %v; want the others listed", err)
	}
	defer l.Close()
	if _, err := l.Definitions(context.Background(), "typo"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("typo's Definitions: %v; want why its package did not install", err)
	}

	_, err = lister(`version: 1
servers:
  typo:
    command: [npx, -y, "@x/not-published"]
    placement: group:g
    tools: {allow: ["*"]}
  good:
    command: [sh, -c, "sleep 1"]
    placement: group:g
    tools: {allow: ["*"]}
`)
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a group member's package does not install: %v; want the Lister refused with why", err)
	}

	_, err = lister(`version: 1
servers:
  typo:
    package: npm:@x/not-published
    tools: {allow: ["*"]}
`)
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("no server left: %v; want the Lister refused with why", err)
	}
}

// TestWithoutServersKeepsPrefixes: the Lister's config without the
// servers that could not be set up gives the others the prefixes they
// have in the whole config, and leaves that config as it was.
func TestWithoutServersKeepsPrefixes(t *testing.T) {
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  typo:
    command: [npx, -y, "@x/not-published"]
    tools: {allow: ["*"]}
  good:
    command: [sh, -c, "sleep 1"]
    tools: {allow: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	kept := withoutServers(c, map[string]error{"typo": errors.New("not found")})
	if len(kept.Servers) != 1 || kept.Servers[0].Name != "good" || kept.EffectivePrefix(kept.Servers[0]) != "good__" {
		t.Fatalf("withoutServers: %d servers; want good alone with its prefix good__", len(kept.Servers))
	}
	if len(c.Servers) != 2 || c.Server("good").Prefix != nil {
		t.Errorf("withoutServers changed the config it was given")
	}
}

// TestMissingInputBeforeInstall: a package server whose filesystem.input
// or a mount's source is missing, or whose input is the user's home
// directory (a config error, as for a command server), fails with that
// reason before its package is fetched,
// not after the install as the install's failure; an input that is fine
// is not refused because the state dir is not made yet (a first pin).
func TestMissingInputBeforeInstall(t *testing.T) {
	var requests atomic.Int32
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	defer reg.Close()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("NPM_CONFIG_USERCONFIG", "")
	t.Setenv("npm_config_registry", "")
	t.Setenv("NPM_CONFIG_REGISTRY", reg.URL+"/")
	for _, tc := range []struct{ source, mount, want, named string }{
		{"./data-missing", ".", "server fs: filesystem.input: ", "data-missing"},
		{home, ".", "is or holds your home directory", home},
		{".", ".", "@modelcontextprotocol/server-filesystem: not found at", ""},
		{".", "./out-missing", "server fs: mount /data/out: ", "out-missing"},
	} {
		c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  fs:
    command: [npx, -y, "@modelcontextprotocol/server-filesystem", /workspace/input]
    filesystem: {input: {source: `+tc.source+`}, mounts: [{source: `+tc.mount+`, target: /data/out}]}
    tools: {allow: ["*"]}
`))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		l, err := NewLister(ListOptions{Config: c, ConfigPath: filepath.Join(dir, "mcpbox.yaml"), Base: dir,
			StateDir: filepath.Join(t.TempDir(), "fresh", "state"), NoRecord: true})
		if err == nil {
			l.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.named) {
			t.Errorf("input %s, mount %s: NewLister: %v; want %q named and %q", tc.source, tc.mount, err, tc.named, tc.want)
		}
		fetched := strings.Contains(tc.want, "not found at") // the only one that may start
		if n := requests.Swap(0); n != 0 && !fetched {
			t.Errorf("input %s, mount %s: the registry saw %d requests for a server that cannot start", tc.source, tc.mount, n)
		}
		if tc.source == "." {
			var ce *ConfigError
			if errors.As(err, &ce) {
				t.Errorf("input .: a config error: %v", err)
			}
		} else if tc.source == home {
			if ce := (*ConfigError)(nil); !errors.As(err, &ce) {
				t.Errorf("input %s: %v is not a config error (a command server's is)", tc.source, err)
			}
		}
	}
}

// TestListerOnly: `mcpbox pin SERVER` starts that server alone: another
// server's package is not installed (the registry is not asked), so a
// package that does not resolve, or a registry that cannot be reached,
// does not keep the named one from being pinned.
func TestListerOnly(t *testing.T) {
	var requests atomic.Int32
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	defer reg.Close()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("NPM_CONFIG_USERCONFIG", "")
	t.Setenv("npm_config_registry", "")
	t.Setenv("NPM_CONFIG_REGISTRY", reg.URL+"/")
	c, err := config.Load("mcpbox.yaml", []byte(`version: 1
servers:
  ok:
    command: [sh, -c, "exit 0"]
    tools: {allow: ["*"]}
  typo:
    command: [npx, -y, "@modelcontextprotocol/server-filesytem"]
    tools: {allow: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := ListOptions{Config: c, ConfigPath: filepath.Join(dir, "mcpbox.yaml"), Base: dir, StateDir: filepath.Join(dir, "state"), NoRecord: true}
	o.Only = []string{"ok"}
	l, err := NewLister(o)
	if err != nil {
		t.Fatalf("NewLister of ok alone: %v", err)
	}
	l.Close()
	if n := requests.Swap(0); n != 0 {
		t.Errorf("the registry saw %d requests for a server not asked for", n)
	}
	// Asked for, the broken one fails alone, and not as a config error.
	o.Only = []string{"typo"}
	l, err = NewLister(o)
	if err == nil {
		l.Close()
		t.Fatal("NewLister of the typo: no error")
	}
	if ce := (*ConfigError)(nil); errors.As(err, &ce) || !strings.Contains(err.Error(), "server-filesytem") {
		t.Errorf("NewLister of the typo: %v; want its package named, not a config error", err)
	}
}

// TestListerRedactsURLKey: mcpbox pin's error for a remote server that
// cannot be reached quotes its URL with the key in its path redacted, as
// serve's does, and still unwraps to the gateway's error.
func TestListerRedactsURLKey(t *testing.T) {
	const key = "NjM0ZjUxYjAtOTk4Zi00Y2Q1LWI3ZTEtMzA1"
	down := httptest.NewServer(http.NotFoundHandler())
	url := down.URL + "/api/mcp/s/" + key + "/mcp"
	down.Close() // nothing listens there now: the connection is refused
	c, err := config.Load("mcpbox.yaml", []byte("version: 1\nservers:\n  zapier:\n    url: "+url+"\n    tools: {allow: [\"*\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l, err := NewLister(ListOptions{Config: c, ConfigPath: filepath.Join(dir, "mcpbox.yaml"), Base: dir, StateDir: filepath.Join(dir, "state"), NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.Definitions(context.Background(), "zapier")
	if err == nil || strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "[REDACTED:url_zapier]") {
		t.Errorf("Definitions: %v; want the URL's key redacted", err)
	}
	if errors.Unwrap(err) == nil {
		t.Error("the redacted error does not unwrap")
	}
}
