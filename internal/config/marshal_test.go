package config

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// roundTrip marshals c, parses the output and checks that it is c again
// and that marshalling is stable. It returns the printed YAML.
func roundTrip(t *testing.T, c *Config) []byte {
	t.Helper()
	out, err := c.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	back, err := Parse(c.File, out)
	if err != nil {
		t.Fatalf("Parse(Marshal()):\n%v\nYAML:\n%s", err, out)
	}
	if diff := cmp.Diff(c, back, ignorePos); diff != "" {
		t.Fatalf("round trip changed the config (-before +after):\n%s\nYAML:\n%s", diff, out)
	}
	again, err := back.Marshal()
	if err != nil || !bytes.Equal(out, again) {
		t.Fatalf("Marshal not stable (err %v):\n%s\nthen:\n%s", err, out, again)
	}
	return out
}

func TestMarshalRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		c    *Config
	}{
		{"design example", designExample()},
		{"empty", &Config{}},
		{"present but empty", &Config{
			File: "x.yaml", Clients: []Client{}, Servers: []*Server{},
			Sandbox: Sandbox{Require: []string{}}, Approvals: Approvals{Channels: []string{}},
		}},
		{"empty server parts", &Config{Servers: []*Server{{
			Name: "s", Command: []string{}, Env: []EnvVar{}, Secrets: []Secret{{Name: "A"}},
			Filesystem: Filesystem{Input: &Input{}, Output: &Output{}, Mounts: []Mount{{}}},
			Network:    Network{Egress: []Egress{{Ports: []int{}}}, Forward: []Forward{}},
			Tools:      Tools{Rules: []Rule{{}}, Allow: []string{}},
			Sandbox:    Sandbox{Require: []string{}},
		}}}},
		{"workspace sizes", &Config{Servers: []*Server{{
			Name: "s",
			Filesystem: Filesystem{Input: &Input{Source: "in", Mode: ModeOverlay, Size: 1 << 30}, Output: &Output{Size: 5e6},
				Mounts: []Mount{{Source: "repo", Target: "/repo", Mode: ModeRW, Git: ModeRW}}},
		}}}},
		{"awkward strings", &Config{
			Version:  -3,
			StateDir: "  leading and trailing  ",
			Clients:  []Client{{Name: "yes"}, {Name: "123"}, {Name: "~"}, {Name: "null"}},
			Servers: []*Server{{
				Name:    "0x10",
				Command: []string{"sh", "-c", "echo 'a: b' # not a comment", "", "true", "1.5", "\ttab", "line\nbreak", "- dash", "{x}", "[y]", "*star", "&amp", "!bang", "%pct", "@at", "`tick`", "ünïcødé", "\x01ctl"},
				Env:     []EnvVar{{Name: "", Value: ""}, {Name: "<<", Value: "<<"}, {Name: "a b", Value: "#x"}, {Name: "K", Value: "null"}},
				Tools:   Tools{Rules: []Rule{{Tool: "t", When: "a ==\n  \"b\"\n", Action: "deny"}}},
				Limits:  Limits{CPU: 1e-9, Pids: -1, Memory: 3, Output: 1 << 62},
			}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			roundTrip(t, tt.c)
		})
	}
}

func TestMarshalDesignExample(t *testing.T) {
	c, err := Load("design-example.yaml", readDesignExample(t))
	if err != nil {
		t.Fatal(err)
	}
	out := roundTrip(t, c)
	if _, err := Load("printed.yaml", out); err != nil {
		t.Errorf("printed config does not validate: %v\n%s", err, out)
	}
	for _, want := range []string{"memory: 512Mi", "idle_stop: 1h", "call_timeout: 1m", "host: '*.githubusercontent.com'"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("printed config lacks %q:\n%s", want, out)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(readDesignExample(f))
	for _, s := range []string{
		base,
		"",
		"version: 1\nservers: {}\n",
		base + "    env: {N: 0x10, F: 1.50, B: false, S: ''}\n",
		base + "    limits: {memory: 1G, output: 1048576, cpu: 0.5, call_timeout: 1h30m}\n",
		base + "    filesystem: {input: {source: .}, output:, mounts: [{source: a, target: /b}]}\n",
		base + "    secrets: {K: {from: env:K, as: file, ttl: 5m}}\n",
		"version: 1\nservers:\n  s:\n    command: &c [srv]\n  t:\n    command: *c\n",
		"version: 1\n<<: {version: 1}\n",
		"a: b: c\n",
		"- [\n",
		"version: 1\n---\nversion: 1\n",
		"version: 1\nversion: 2\n",
		base + "    network: {egress: [{host: '*', ports: [1, 65535]}], forward: [{listen: '127.0.0.1:1', to: 'a:2'}]}\n",
		base + "    network: {egress: [{host: a.example}], limits: {connections: 8, bytes_per_connection: 1Mi, bytes_total: 1Gi, idle: 1m, max_duration: 1h}}\n",
		base + "    tools: {rules: [{tool: \"x\", when: \"a\\nb\", action: allow}], rate_limit: {per_minute: 3}}\n",
		"version: 1\nlisten: {http: {addr: ':1', tls: {cert: a, key: b}}}\nclients: [{name: a, token: {from: 'cmd:x'}}]\n",
		"version: 1\nsandbox: {warm_pool: 2}\nservers:\n  s:\n    command: [srv]\n    sandbox: {warm_pool: 0, require: []}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		if err != nil {
			es := AsErrors(err)
			if len(es) == 0 {
				t.Fatalf("Parse error is not an Errors: %v", err)
			}
			for _, e := range es {
				if e.Line < 1 || e.Col < 1 || e.File != "f.yaml" {
					t.Fatalf("error without position: %#v", e)
				}
			}
			return
		}
		_ = Validate(c) // must not panic
		roundTrip(t, c)
	})
}
