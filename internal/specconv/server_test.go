package specconv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/sandbox"
)

// policySpec is Policy of the config file at path, as exec --policy
// reads it.
func policySpec(t *testing.T, path string) (sandbox.Spec, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, data)
	if err != nil {
		return sandbox.Spec{}, err
	}
	spec, _, err := Policy(c, path)
	return spec, err
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "mcpbox.yaml")
	write(t, cfg, `version: 1
sandbox: {require: [userns, seccomp, landlock]}
servers:
  fs:
    command: [node, server.js]
    filesystem:
      input: {source: ./repo}
      output: {source: ./out, size: 32Mi}
      tmp: {size: 64Mi}
      mounts: [{source: ./repo, target: /data}]
    env: {LOG_LEVEL: debug}
    network: {limits: {connections: 4, idle: 30s}}
    exec: {allow: [/workspace/output/tool]}
    limits: {memory: 256Mi, pids: 32, cpu: 0.5}
`)
	spec, err := policySpec(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	want := sandbox.Spec{
		Input: filepath.Join(real, "repo"), Output: filepath.Join(real, "out"),
		Mounts:        []sandbox.Mount{{Source: filepath.Join(real, "repo"), Target: "/data", Exec: true}},
		Env:           []string{"LOG_LEVEL=debug"},
		ExecAllow:     []string{"/workspace/output/tool"},
		Limits:        sandbox.Limits{Memory: 256 << 20, Pids: 32, CPU: 0.5, TmpSize: 64 << 20, OutputSize: 32 << 20},
		Network:       sandbox.Network{Limits: egress.Limits{MaxConns: 4, IdleTimeout: 30 * time.Second}},
		AllowDegraded: []sandbox.Layer{sandbox.LayerCgroups, sandbox.LayerIdmap},
	}
	if diff := cmp.Diff(want, spec, cmpopts.IgnoreUnexported(sandbox.Spec{})); diff != "" {
		t.Fatalf("spec (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err != nil {
		t.Fatalf("output dir not created: %v", err)
	}
}

func TestPolicyDefaults(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcpbox.yaml")
	write(t, cfg, "version: 1\nservers:\n  s:\n    command: [x]\n    network: {egress: [{host: api.example.com}]}\n")
	spec, err := policySpec(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mem, pids := DefaultLimits()
	if spec.Limits.Memory != mem || spec.Limits.Pids != pids || mem == 0 || pids == 0 {
		t.Fatalf("limits %+v, want the exec defaults %d/%d", spec.Limits, mem, pids)
	}
	if len(spec.Network.Rules) != 1 || spec.Network.Rules[0].Host != "api.example.com" || len(spec.Network.Rules[0].Ports) != 0 {
		t.Fatalf("egress rules %+v, want api.example.com with the default ports", spec.Network.Rules)
	}
	if len(spec.AllowDegraded) != 0 || spec.AllowAllDegraded {
		t.Fatalf("a config without sandbox.require accepts degradation: %+v", spec.AllowDegraded)
	}
}

// TestServerSpecInputSize: serve bounds an input overlay's changes by
// filesystem.input.size.
func TestServerSpecInputSize(t *testing.T) {
	base := t.TempDir()
	c, err := config.Load("t.yaml", []byte("version: 1\nservers:\n  s:\n    command: [x]\n    filesystem: {input: {source: ., mode: overlay, size: 3Mi}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var spec sandbox.Spec
	if err := serverSpec(c, c.Servers[0], base, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Limits.InputSize != 3<<20 {
		t.Fatalf("input size limit %d, want 3 MiB", spec.Limits.InputSize)
	}
}

// TestConfigMountSourceWithColon: a config mount's source is a name, not
// the --mount flag's SRC:DST[:MODE] syntax: a dir whose name holds ":"
// is mounted, for serve (Server) as for exec and run --policy (Policy).
// It used to go through the flag syntax and be refused, at serve only.
// A mount's git: rw reaches the sandbox as KeepGit.
func TestConfigMountSourceWithColon(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"a:b", "c:d:rw", "repo"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(base, "mcpbox.yaml")
	write(t, cfg, `version: 1
servers:
  s:
    command: [x]
    filesystem:
      mounts: [{source: "./a:b", target: /data}, {source: "c:d:rw", target: /out, mode: rw}, {source: repo, target: /repo, mode: rw, git: rw}]
`)
	real, err := filepath.EvalSymlinks(base)
	if err != nil {
		t.Fatal(err)
	}
	want := []sandbox.Mount{
		{Source: filepath.Join(real, "a:b"), Target: "/data", Exec: true},
		{Source: filepath.Join(real, "c:d:rw"), Target: "/out", Writable: true},
		{Source: filepath.Join(real, "repo"), Target: "/repo", Writable: true, KeepGit: true},
	}
	c := loadConfig(t, cfg)
	spec, err := Server(c, c.Servers[0], Options{Base: base, StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Server: %v", err)
	}
	if diff := cmp.Diff(want, spec.Mounts); diff != "" {
		t.Errorf("Server mounts (-want +got):\n%s", diff)
	}
	spec, err = policySpec(t, cfg)
	if err != nil {
		t.Fatalf("Policy: %v", err)
	}
	if diff := cmp.Diff(want, spec.Mounts); diff != "" {
		t.Errorf("Policy mounts (-want +got):\n%s", diff)
	}
}

// TestProtectedFilesEveryPath: a server that mounts the lock file's dir
// writable is refused by Server and Group alike, whichever command asks
// (serve, pin): the protected paths are data in Options, not a guard's.
func TestProtectedFilesEveryPath(t *testing.T) {
	project := t.TempDir()
	cfg := filepath.Join(project, "mcpbox.yaml")
	write(t, cfg, `version: 1
servers:
  s:
    command: [x]
    placement: group:g
    filesystem:
      mounts: [{source: ., target: /data, mode: rw}]
`)
	c := loadConfig(t, cfg)
	o := Options{Base: project, StateDir: t.TempDir()}
	if _, err := Server(c, c.Servers[0], o); err != nil {
		t.Fatalf("Server without protected paths: %v", err)
	}
	o.Protected = ProtectedFiles(c, project, cfg, filepath.Join(project, "mcpbox.lock"))
	if _, err := Server(c, c.Servers[0], o); err == nil || !strings.Contains(err.Error(), "contains "+project) {
		t.Errorf("Server: %v, want a refusal naming %s", err, project)
	}
	if _, err := Group(c, c.Servers, o); err == nil || !strings.Contains(err.Error(), "contains "+project) {
		t.Errorf("Group: %v, want a refusal naming %s", err, project)
	}
}

// TestProtectedFiles: the lock file's dir, the config and the audit
// copy (resolved against the config's dir); no config for the default.
func TestProtectedFiles(t *testing.T) {
	c := &config.Config{}
	c.Audit.JSONL = "audit/copy.jsonl"
	got := ProtectedFiles(c, "/p", "/p/mcpbox.yaml", "/p/mcpbox.lock")
	if diff := cmp.Diff([]string{"/p", "/p/audit/copy.jsonl", "/p/mcpbox.yaml"}, got); diff != "" {
		t.Errorf("ProtectedFiles (-want +got):\n%s", diff)
	}
	got = ProtectedFiles(&config.Config{}, "/w", "", "/state/mcpbox.lock")
	if diff := cmp.Diff([]string{"/state", ""}, got); diff != "" {
		t.Errorf("ProtectedFiles of the default (-want +got):\n%s", diff)
	}
}

func loadConfig(t *testing.T, path string) *config.Config {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
