package sandbox

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/egress"
)

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "HOME=/h", "A=1"}, []string{"A=2", "B=x=y", "PATH=/usr/bin"})
	want := []string{"PATH=/usr/bin", "HOME=/h", "A=2", "B=x=y"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("mergeEnv (-want +got):\n%s", diff)
	}
}

func TestEnvironHasNoHostVariables(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "host-secret")
	t.Setenv("LANG", "de_DE.UTF-8")
	s := Spec{Env: []string{"GIVEN=1"}}
	env := s.environ()
	seen := map[string]string{}
	for _, kv := range env {
		k, v, _ := cutEq(kv)
		seen[k] = v
	}
	if _, ok := seen["AWS_SECRET_ACCESS_KEY"]; ok {
		t.Fatal("host variable passed into the sandbox")
	}
	for k, v := range map[string]string{"GIVEN": "1", "HOME": sandboxHome, "LANG": "de_DE.UTF-8", "USER": sandboxUser} {
		if seen[k] != v {
			t.Errorf("%s = %q, want %q", k, seen[k], v)
		}
	}
}

func cutEq(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

func TestLandlockRules(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want []pathRule
	}{{
		name: "default",
		spec: Spec{},
		want: []pathRule{
			{Path: "/", Read: true},
			{Path: "/dev", Read: true, Write: true, Ioctl: true},
			{Path: "/tmp", Read: true, Write: true},
			{Path: "/usr", Read: true, Exec: true},
		},
	}, {
		name: "workspace and mounts",
		spec: Spec{Input: "/src", Output: "/out", ExecAllow: []string{"/workspace/output/bin/tool"},
			Mounts: []Mount{{Source: "/d", Target: "/data", Exec: true}, {Source: "/c", Target: "/cache", Writable: true}}},
		want: []pathRule{
			{Path: "/", Read: true},
			{Path: "/dev", Read: true, Write: true, Ioctl: true},
			{Path: "/tmp", Read: true, Write: true},
			{Path: "/usr", Read: true, Exec: true},
			{Path: InputDir, Read: true, Exec: true},
			{Path: OutputDir, Read: true, Write: true},
			{Path: "/data", Read: true, Exec: true},
			{Path: "/cache", Read: true, Write: true},
			{Path: "/workspace/output/bin/tool", Read: true, Exec: true, Optional: true},
		},
	}, {
		name: "exec writable",
		spec: Spec{Output: "/out", ExecWritable: true},
		want: []pathRule{
			{Path: "/", Read: true},
			{Path: "/dev", Read: true, Write: true, Ioctl: true},
			{Path: "/tmp", Read: true, Write: true, Exec: true},
			{Path: "/usr", Read: true, Exec: true},
			{Path: OutputDir, Read: true, Write: true, Exec: true},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.spec.landlockRules([]string{"/usr"})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("landlockRules (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWorkdir(t *testing.T) {
	for _, tt := range []struct {
		spec Spec
		want string
	}{
		{Spec{}, "/workspace"},
		{Spec{Output: "/o"}, OutputDir},
		{Spec{Output: "/o", Dir: "/tmp"}, "/tmp"},
	} {
		if got := tt.spec.workdir(); got != tt.want {
			t.Errorf("workdir(%+v) = %q, want %q", tt.spec, got, tt.want)
		}
	}
}

func TestParseLayer(t *testing.T) {
	for _, l := range AllLayers {
		got, err := ParseLayer(string(l))
		if err != nil || got != l {
			t.Errorf("ParseLayer(%q) = %q, %v", l, got, err)
		}
	}
	if _, err := ParseLayer("selinux"); err == nil {
		t.Error("ParseLayer accepted an unknown layer")
	}
}

func TestDegradable(t *testing.T) {
	s := Spec{AllowDegraded: []Layer{LayerCgroups}}
	if !s.degradable(LayerCgroups) || s.degradable(LayerSeccomp) {
		t.Fatal("degradable ignores the list")
	}
	all := Spec{AllowAllDegraded: true}
	if all.degradable(LayerUserns) {
		t.Fatal("user namespaces must never be degradable")
	}
	if !all.degradable(LayerLandlock) {
		t.Fatal("AllowAllDegraded does not accept landlock")
	}
}

func TestProxyEnvNoProxy(t *testing.T) {
	noProxyFwd := func(rules []egress.Rule, fwd []egress.Forward) string {
		for _, kv := range proxyEnv(rules, fwd) {
			if v, ok := strings.CutPrefix(kv, "NO_PROXY="); ok {
				return v
			}
		}
		return "<unset>"
	}
	noProxy := func(rules []egress.Rule) string { return noProxyFwd(rules, nil) }
	if got := noProxy([]egress.Rule{{Host: "api.example.com"}}); got != "localhost,127.0.0.1,::1" {
		t.Errorf("NO_PROXY = %q, want the sandbox's loopback names", got)
	}
	// A rule naming the host's loopback sends those requests to the proxy.
	if got := noProxy([]egress.Rule{{Host: "127.0.0.1", Ports: []int{8080}}}); got != "localhost,::1" {
		t.Errorf("NO_PROXY = %q with a rule for 127.0.0.1", got)
	}
	if got := noProxy([]egress.Rule{{Host: "localhost"}, {CIDR: netip.MustParsePrefix("::1/128")}}); got != "127.0.0.1" {
		t.Errorf("NO_PROXY = %q with rules for localhost and ::1", got)
	}
	// A forward listening on another loopback IP is reached directly (the
	// proxy refuses 127.0.0.2:8080 when asked for it), once, unless a rule
	// names that IP.
	fwd := []egress.Forward{{Listen: "127.0.0.2:8080", To: "db:5432"}, {Listen: "127.0.0.2:8081", To: "db:5433"}, {Listen: "127.0.0.1:5432", To: "db:5432"}}
	if got := noProxyFwd([]egress.Rule{{Host: "api.example.com"}}, fwd); got != "localhost,127.0.0.1,::1,127.0.0.2" {
		t.Errorf("NO_PROXY = %q with forwards on 127.0.0.2", got)
	}
	if got := noProxyFwd([]egress.Rule{{Host: "127.0.0.2"}}, fwd); got != "localhost,127.0.0.1,::1" {
		t.Errorf("NO_PROXY = %q with forwards on 127.0.0.2 and a rule naming it", got)
	}
}

func TestTransparentPorts(t *testing.T) {
	cases := []struct {
		name string
		n    Network
		want []int
	}{
		{"no rules", Network{}, nil},
		{"forwards alone", Network{Forwards: []egress.Forward{{Listen: "127.0.0.1:5432", To: "db:5432"}}}, nil},
		{"a rule without ports", Network{Rules: []egress.Rule{{Host: "example.com"}}}, []int{80, 443}},
		{"ports of all rules, low ones once, never 53", Network{Rules: []egress.Rule{
			{Host: "a.example", Ports: []int{443, 8443, 22}},
			{Host: "b.example", Ports: []int{22, 53, 1023, 1024}},
		}}, []int{22, 443, 1023}},
		{"a port a forward listens on", Network{
			Rules:    []egress.Rule{{Host: "example.com"}},
			Forwards: []egress.Forward{{Listen: "127.0.0.2:80", To: "web:80"}},
		}, []int{443}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, c.n.TransparentPorts()); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", c.name, diff)
		}
	}
}
