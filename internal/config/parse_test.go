package config

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ignorePos compares configs as data, without file positions.
var ignorePos = cmpopts.IgnoreTypes(Meta{}, Pos{})

// designExample is testdata/design-example.yaml written out by hand from
// DESIGN.md, independently of the parser.
func designExample() *Config {
	return &Config{
		File:     "design-example.yaml",
		Version:  1,
		StateDir: "~/.local/state/mcpbox",
		Listen: Listen{HTTP: HTTP{
			Addr:           "127.0.0.1:8765",
			AllowedOrigins: []string{"http://localhost:*"},
			TLS:            TLS{Cert: "c.pem", Key: "k.pem"},
		}},
		Clients: []Client{{Name: "claude-desktop", Token: Token{From: "env:MCPBOX_TOKEN_DESKTOP"}}},
		Servers: []*Server{{
			Name:      "github",
			Command:   []string{"github-mcp-server", "stdio"},
			Placement: "isolated",
			Scope:     "agent",
			Filesystem: Filesystem{
				Input:  &Input{Source: "./repo"},
				Output: &Output{},
				Tmp:    Tmp{Size: 256 << 20},
				Mounts: []Mount{{Source: "~/datasets", Target: "/data", Mode: "ro"}},
			},
			Env:     []EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
			Secrets: []Secret{{Name: "GITHUB_TOKEN", From: "env:GH_TOKEN_ISSUES_RO", As: "env"}},
			Network: Network{
				Egress: []Egress{
					{Host: "api.github.com", Ports: []int{443}},
					{Host: "*.githubusercontent.com"},
				},
				Forward: []Forward{{Listen: "127.0.0.1:5432", To: "db.internal:5432"}},
			},
			Exec: Exec{Allow: []string{"/usr/bin/node", "/usr/bin/git"}},
			Limits: Limits{
				Memory: 512 << 20, Pids: 256, CPU: 1.0,
				CallTimeout: Duration(60 * time.Second), Output: 1 << 20,
			},
			Lifecycle: Lifecycle{
				Idle: Duration(10 * time.Minute), IdleAction: "pause", IdleStop: Duration(time.Hour),
				MaxLifetime: Duration(8 * time.Hour), Restart: "on-failure",
			},
			Pin: "tofu",
			Tools: Tools{
				Allow:     []string{"*"},
				Deny:      []string{"delete_repository"},
				Approve:   []string{"create_pull_request"},
				Rules:     []Rule{{Tool: "create_*", When: `args.repo.startsWith("org/")`, Action: "allow"}},
				RateLimit: RateLimit{PerMinute: 60},
			},
		}},
		Approvals: Approvals{Timeout: Duration(2 * time.Minute), Channels: []string{"elicitation", "cli", "web"}},
		Audit:     Audit{Store: "sqlite", JSONL: "./audit.jsonl"},
	}
}

func readDesignExample(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/design-example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDesignExample(t *testing.T) {
	c, err := Load("design-example.yaml", readDesignExample(t))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(designExample(), c, ignorePos); diff != "" {
		t.Errorf("config mismatch (-want +got):\n%s", diff)
	}
	s := c.Server("github")
	if s == nil {
		t.Fatal(`Server("github") = nil`)
	}
	// Positions counted by hand in testdata/design-example.yaml.
	positions := []struct {
		name      string
		got, want Pos
	}{
		{"server name", s.Meta.Pos, Pos{8, 3}},
		{"limits.memory", s.Limits.Meta.At("memory"), Pos{24, 22}},
		{"exec.allow[1]", s.Exec.Meta.Elem("allow", 1), Pos{23, 35}},
		{"egress[0].ports[0]", s.Network.Egress[0].Meta.Elem("ports", 0), Pos{21, 47}},
		{"env LOG_LEVEL", s.Env[0].Pos, Pos{17, 11}},
		{"absent key falls back", s.Limits.Meta.At("nope"), Pos{24, 13}},
	}
	for _, p := range positions {
		if p.got != p.want {
			t.Errorf("%s at %v, want %v", p.name, p.got, p.want)
		}
	}
	if !s.Limits.Meta.Has("pids") || s.Limits.Meta.Has("nope") {
		t.Errorf("Meta.Has: pids %v, nope %v; want true, false", s.Limits.Meta.Has("pids"), s.Limits.Meta.Has("nope"))
	}
}

// base is a minimal valid config; tests append to it from line 5 on.
const base = "version: 1\nservers:\n  s:\n    command: [srv]\n"

func TestLoadValid(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, c *Config)
	}{
		{"minimal", base, func(t *testing.T, c *Config) {
			want := &Config{File: "t.yaml", Version: 1, Servers: []*Server{{Name: "s", Command: []string{"srv"}}}}
			if diff := cmp.Diff(want, c, ignorePos); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got := c.RequiredLayers(c.Servers[0]); !cmp.Equal(got, AllLayers()) {
				t.Errorf("RequiredLayers = %v, want all", got)
			}
		}},
		{"scalar args and env values as written", "version: 1\nservers:\n  s:\n    command: [srv, --port, 8080, -v, true]\n    env: {N: 0x10, F: 1.50, B: false, S: ''}\n",
			func(t *testing.T, c *Config) {
				s := c.Servers[0]
				if want := []string{"srv", "--port", "8080", "-v", "true"}; !cmp.Equal(s.Command, want) {
					t.Errorf("command = %q, want %q", s.Command, want)
				}
				want := []EnvVar{{Name: "N", Value: "0x10"}, {Name: "F", Value: "1.50"}, {Name: "B", Value: "false"}, {Name: "S"}}
				if diff := cmp.Diff(want, s.Env, ignorePos); diff != "" {
					t.Errorf("env (-want +got):\n%s", diff)
				}
			}},
		{"null mapping is an empty mapping", base + "    filesystem:\n      output:\n", func(t *testing.T, c *Config) {
			if c.Servers[0].Filesystem.Output == nil {
				t.Error("output: (null) gave nil Output, want present")
			}
			if c.Servers[0].Filesystem.Input != nil {
				t.Error("absent input gave non-nil Input")
			}
		}},
		{"server order kept", "version: 1\nservers:\n  zeta: {command: [z]}\n  alpha: {command: [a]}\n  mid: {command: [m]}\n",
			func(t *testing.T, c *Config) {
				var names []string
				for _, s := range c.Servers {
					names = append(names, s.Name)
				}
				if want := []string{"zeta", "alpha", "mid"}; !cmp.Equal(names, want) {
					t.Errorf("names = %v, want %v", names, want)
				}
			}},
		{"remote server", "version: 1\nservers:\n  r:\n    url: https://mcp.example.com/mcp\n    scope: session\n    limits: {call_timeout: 30s}\n",
			func(t *testing.T, c *Config) {
				if s := c.Servers[0]; s.URL != "https://mcp.example.com/mcp" || s.Command != nil {
					t.Errorf("url %q command %v", s.URL, s.Command)
				}
			}},
		{"http to loopback remote", "version: 1\nservers:\n  r: {url: 'http://127.0.0.1:9000/mcp', placement: remote}\n", nil},
		{"groups", "version: 1\nservers:\n  a: {command: [a], placement: 'group:tools'}\n  b: {command: [b], placement: 'group:tools'}\n",
			func(t *testing.T, c *Config) {
				if c.Servers[1].Placement != "group:tools" {
					t.Errorf("placement = %q", c.Servers[1].Placement)
				}
			}},
		{"require lists", "version: 1\nsandbox: {require: [userns, seccomp]}\nservers:\n  a: {command: [a]}\n  b: {command: [b], sandbox: {require: []}}\n",
			func(t *testing.T, c *Config) {
				if got := c.RequiredLayers(c.Servers[0]); !cmp.Equal(got, []string{"userns", "seccomp"}) {
					t.Errorf("a: RequiredLayers = %v", got)
				}
				if got := c.RequiredLayers(c.Servers[1]); got == nil || len(got) != 0 {
					t.Errorf("b: RequiredLayers = %#v, want empty non-nil", got)
				}
			}},
		{"sizes and durations", base + "    limits: {memory: 1G, output: 1048576, cpu: 0.5, call_timeout: 1h30m}\n    filesystem: {tmp: {size: 64Ki}}\n",
			func(t *testing.T, c *Config) {
				l := c.Servers[0].Limits
				if l.Memory != 1e9 || l.Output != 1<<20 || l.CPU != 0.5 || l.CallTimeout != Duration(90*time.Minute) {
					t.Errorf("limits = %+v", l)
				}
				if got := c.Servers[0].Filesystem.Tmp.Size; got != 64<<10 {
					t.Errorf("tmp.size = %d", got)
				}
			}},
		{"workspace sizes", base + "    filesystem: {input: {source: ., mode: overlay, size: 2Gi}, output: {size: 512Mi}}\n",
			func(t *testing.T, c *Config) {
				fs := c.Servers[0].Filesystem
				if fs.Input.Size != 2<<30 || fs.Output.Size != 512<<20 || fs.Output.Source != "" {
					t.Errorf("input.size = %d, output = %+v", fs.Input.Size, fs.Output)
				}
			}},
		{"mount targets beside reserved ones", base + "    filesystem:\n      mounts:\n        - {source: a, target: /workspace/cache, mode: rw}\n        - {source: b, target: /data}\n        - {source: c, target: /datasub}\n        - {source: d, target: /usrx}\n", nil},
		{"egress forms", base + "    network:\n      egress:\n        - {host: '*'}\n        - {host: 10.0.0.5, ports: [5432]}\n        - {host: 'fd00::1'}\n        - {cidr: 10.0.0.0/8, ports: [80, 443]}\n        - {host: db.internal, cidr: 10.1.0.0/16}\n      forward: [{listen: '[::1]:8080', to: '[fd00::2]:80'}]\n", nil},
		{"listen beyond loopback with clients", "version: 1\nlisten: {http: {addr: ':8765', allowed_origins: ['https://app.example.com', 'http://[::1]:*']}}\nclients: [{name: a, token: {from: file:/run/tok}}, {name: b, token: {from: 'cmd:pass show b'}}]\nservers:\n  s: {command: [s]}\n", nil},
		{"secret as file with same env name", base + "    env: {K: v}\n    secrets: {K: {from: env:K, as: file, ttl: 5m}}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load("t.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Load:\n%v", err)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestLoadErrorsCollected(t *testing.T) {
	data := "version: 1\nbogus: 1\nservers:\n  s:\n    command: [srv]\n    limits: {pids: x, cpu: y}\n    pin: nope\n"
	_, err := Parse("t.yaml", []byte(data))
	want := strings.Join([]string{
		`t.yaml:2:1: unknown top-level key "bogus"`,
		`t.yaml:6:20: servers.s.limits.pids: expected an integer, got a string`,
		`t.yaml:6:28: servers.s.limits.cpu: expected a number, got a string`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("Parse error:\n%v\nwant:\n%s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Line != 2 || e.Col != 1 || e.File != "t.yaml" {
		t.Errorf("errors.As(*Error) = %+v", e)
	}
	if n := len(AsErrors(err)); n != 3 {
		t.Errorf("AsErrors: %d errors, want 3", n)
	}

	// Validation errors are collected across checks and sorted by position.
	data = "version: 1\nservers:\n  s:\n    command: [srv]\n    pin: nope\n    scope: world\napprovals: {timeout: 0s}\n"
	_, err = Load("t.yaml", []byte(data))
	want = strings.Join([]string{
		`t.yaml:5:10: servers.s.pin: invalid value "nope" (want enforce, tofu, warn or off)`,
		`t.yaml:6:12: servers.s.scope: invalid value "world" (want agent, session or shared)`,
		`t.yaml:7:22: approvals.timeout: must be positive (leave it out for the default)`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("Load error:\n%v\nwant:\n%s", err, want)
	}
}

func TestValidateWithoutPositions(t *testing.T) {
	c := &Config{Version: 1, Servers: []*Server{{Name: "x", Command: []string{"x"},
		Filesystem: Filesystem{Mounts: []Mount{{Source: "/a", Target: "/etc/x"}}}}}}
	err := Validate(c)
	want := "servers.x.filesystem.mounts[0].target: /etc/x overlaps /etc, which the sandbox provides"
	if err == nil || err.Error() != want {
		t.Fatalf("Validate = %v, want %q", err, want)
	}
	c.Servers = append(c.Servers, &Server{Name: "x", URL: "https://a.example"})
	c.Servers[0].Filesystem.Mounts = nil
	if err := Validate(c); err == nil || err.Error() != `servers: duplicate server name "x"` {
		t.Fatalf("Validate = %v, want duplicate name", err)
	}
	c.Servers = []*Server{nil}
	if err := Validate(c); err == nil || err.Error() != "servers[0]: nil server" {
		t.Fatalf("Validate = %v, want nil server error", err)
	}
	if _, err := c.Marshal(); err == nil {
		t.Fatal("Marshal of a nil server succeeded")
	}
}

// TestRecoveryDefaults: absent approvals.timeout and lifecycle.restart
// mean a timeout below clients' 60 s and restart on failure; what a
// config says is kept.
func TestRecoveryDefaults(t *testing.T) {
	c, err := Load("t.yaml", []byte("version: 1\nservers:\n  a: {command: [a]}\n  b: {command: [b], lifecycle: {restart: \"no\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Approvals.EffectiveTimeout(); d <= 0 || d >= time.Minute {
		t.Errorf("default approval timeout %v, want in (0, 1m)", d)
	}
	if r := c.Server("a").Lifecycle.EffectiveRestart(); r != RestartOnFailure {
		t.Errorf("absent restart: %q, want %q", r, RestartOnFailure)
	}
	if r := c.Server("b").Lifecycle.EffectiveRestart(); r != RestartNo {
		t.Errorf("restart: no: %q, want %q", r, RestartNo)
	}
	c, err = Load("t.yaml", []byte("version: 1\napprovals: {timeout: 3m}\nservers:\n  a: {command: [a]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Approvals.EffectiveTimeout(); d != 3*time.Minute {
		t.Errorf("approvals.timeout 3m: %v", d)
	}
}

// TestParseRefusesHugeFile: a config past MaxFile is refused before it is
// decoded (35 MB of env took 1.8 GB to decode); one just inside is not.
func TestParseRefusesHugeFile(t *testing.T) {
	head := "version: 1\n"
	pad := func(n int) []byte { return []byte(head + "#" + strings.Repeat("x", n-len(head)-2) + "\n") }
	if _, err := Parse("big.yaml", pad(MaxFile+1)); err == nil || !strings.Contains(err.Error(), "larger than the 4 MiB") {
		t.Errorf("a config of MaxFile+1 bytes: %v, want a refusal", err)
	}
	if _, err := Parse("big.yaml", pad(MaxFile)); err != nil {
		t.Errorf("a config of MaxFile bytes: %v", err)
	}
}
