package daemon

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/kube/egressproxy"
	"mcpbox/internal/pkginstall"
)

// TestKubeEgressPolicyAndEnv: the proxy's config holds exactly the
// kubernetes servers of its namespace that have an allowlist, with their
// rules; a pod's agent gets the proxy's address and a token for its own
// server that the proxy verifies, and renews it with fresh ones.
func TestKubeEgressPolicyAndEnv(t *testing.T) {
	src := "version: 1\nbackend:\n  kind: kubernetes\n  namespace: mcp\n  kubeconfig: /k/config\n  image: r/b:1\n" +
		"servers:\n" +
		"  a:\n    command: [srv]\n    network:\n      egress: [{host: api.example.com, ports: [443]}, {host: db.internal, cidr: 10.1.0.0/16, ports: [5432]}]\n      limits: {bytes_total: 1Mi}\n" +
		"    secrets: {T: {from: env:KUBE_EGRESS_TEST_T, inject: {hosts: [api.example.com], header: Authorization}}}\n" +
		"  quiet:\n    command: [srv]\n" +
		"  other-ns:\n    command: [srv]\n    network: {egress: [{host: x.example}]}\n    backend: {namespace: other}\n" +
		"  local:\n    command: [srv]\n    network: {egress: [{host: y.example}]}\n    backend: {kind: local}\n"
	c, err := config.Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	servers, err := egressServers(c, kubeConnKey(c.BackendOf(c.Server("a"))))
	if err != nil {
		t.Fatal(err)
	}
	a, ok := servers["a"]
	if len(servers) != 1 || !ok || len(a.Rules) != 2 || a.Rules[0].Host != "api.example.com" ||
		a.Rules[1].CIDR.String() != "10.1.0.0/16" || a.Limits.MaxBytesTotal != 1<<20 {
		t.Fatalf("servers = %+v", servers)
	}
	// The proxy's config names the injected secret's hosts, never where
	// its value comes from.
	if len(a.Inject) != 1 || a.Inject[0] != "api.example.com" {
		t.Errorf("a's inject hosts = %q", a.Inject)
	}
	if raw, _ := json.Marshal(servers); strings.Contains(string(raw), "KUBE_EGRESS_TEST_T") {
		t.Errorf("the proxy's config names the secret's reference: %s", raw)
	}
	if other, _ := egressServers(c, kubeConnKey(c.BackendOf(c.Server("other-ns")))); len(other) != 1 || other["other-ns"].Rules == nil {
		t.Errorf("the other namespace's proxy: %+v", other)
	}

	e := &kubeEgress{addr: "10.96.0.9:3128"}
	if _, _, err := e.agentProxy("p", "a", nil); err == nil {
		t.Error("a token before the proxy exists")
	}
	e.key, _ = egressproxy.NewKey()
	p, r, err := e.agentProxy("mcpbox-a-1234", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Addr != "10.96.0.9:3128" || p.User != "mcpbox-a-1234" {
		t.Fatalf("proxy = %+v", p)
	}
	srv, exp, err := egressproxy.Verify(e.key, "mcpbox-a-1234", p.Token, time.Now())
	if err != nil || srv != "a" || exp.Before(time.Now().Add(proxyTokenTTL-time.Minute)) || exp.After(time.Now().Add(proxyTokenTTL+time.Second)) {
		t.Errorf("token: %q %v %v", srv, exp, err)
	}
	// Renewed every third of a token's life, retried within a minute;
	// each renewal a token of its own for the same pod and server.
	if r.Every != proxyTokenTTL/3 || r.Retry != time.Minute {
		t.Errorf("renewal every %s, retry %s", r.Every, r.Retry)
	}
	e.tokenTTL = 3 * time.Second
	_, r, _ = e.agentProxy("mcpbox-a-1234", "a", nil)
	time.Sleep(1100 * time.Millisecond) // a later expiry, in seconds
	tok, err := r.Token()
	if err != nil || tok == p.Token {
		t.Fatalf("renewed token %q, %v", tok, err)
	}
	if srv, exp2, err := egressproxy.Verify(e.key, "mcpbox-a-1234", tok, time.Now()); err != nil || srv != "a" || exp2.After(time.Now().Add(3*time.Second)) {
		t.Errorf("renewed token: %q %v %v", srv, exp2, err)
	}
	if _, _, err := egressproxy.Verify(e.key, "mcpbox-b-1234", tok, time.Now()); err == nil {
		t.Error("a pod's renewed token opens another pod's proxy")
	}
}

// TestKubeDoctorFile: the CLI's doctor reads the file and says why it
// cannot check a cluster.
func TestKubeDoctorFile(t *testing.T) {
	var out strings.Builder
	if _, err := KubeDoctorFile(filepath.Join(t.TempDir(), "none.yaml"), &out); err == nil || !strings.Contains(err.Error(), "reading config") {
		t.Errorf("missing file: %v", err)
	}
	local := filepath.Join(t.TempDir(), "mcpbox.yaml")
	os.WriteFile(local, []byte("version: 1\nservers:\n  s:\n    command: [srv]\n"), 0o600)
	if ok, err := KubeDoctorFile(local, &out); ok || err == nil || !strings.Contains(err.Error(), "no backend of kind kubernetes") {
		t.Errorf("local config: %v %v", ok, err)
	}
}

// TestKubeEgressInstall: a package server's install has a proxy policy
// of its own (SERVER#install: the lockfile's registries only), beside
// and apart from the server's own allowlist (none here: the server has
// no policy, so its pods get nothing through the proxy); an install's
// token names the install, not the server, and expires within minutes.
func TestKubeEgressInstall(t *testing.T) {
	src := "version: 1\nbackend:\n  kind: kubernetes\n  namespace: mcp\n  kubeconfig: /k/config\n" +
		"servers:\n  mem:\n    package: npm:@modelcontextprotocol/server-memory@2025.4.25\n" +
		"  gone:\n    package: npm:left-pad@1.3.0\n    backend: {kind: local}\n"
	c, err := config.Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	lock := []byte(`{"lockfileVersion":3,"packages":{"":{"name":"w"},` +
		`"node_modules/@modelcontextprotocol/server-memory":{"resolved":"http://127.0.0.1:4873/@modelcontextprotocol/server-memory/-/server-memory-2025.4.25.tgz"},` +
		`"node_modules/zod":{"resolved":"https://registry.npmjs.org/zod/-/zod-3.0.0.tgz"},"node_modules/linked":{"link":true}}}`)
	npm := pkginstall.NPMConfig{Registry: "http://127.0.0.1:4873/"}
	rules, err := npm.LockfileRegistryRules(lock)
	if err != nil {
		t.Fatal(err)
	}
	// The registry is not trusted: a resolved URL at an address no
	// configured registry has (cloud metadata, the host's loopback
	// services) would become an address rule of the pod install's proxy.
	for _, bad := range []string{"http://169.254.169.254/latest/meta-data/x.tgz", "http://127.0.0.1:6379/x.tgz", "http://[::ffff:a9fe:a9fe]/x.tgz"} {
		if r, err := npm.LockfileRegistryRules([]byte(`{"packages":{"node_modules/x":{"resolved":"` + bad + `"}}}`)); err == nil {
			t.Errorf("a lockfile resolving to %s gave rules %+v", bad, r)
		}
	}
	if len(rules) != 2 || rules[0].Host != "127.0.0.1" || rules[0].Ports[0] != 4873 || rules[1].Host != "registry.npmjs.org" || rules[1].Ports[0] != 443 {
		t.Fatalf("rules = %+v", rules)
	}
	if _, err := npm.LockfileRegistryRules([]byte(`{"packages":{"node_modules/x":{"resolved":"file:../x"}}}`)); err == nil {
		t.Error("a lockfile resolving to a file: URL was accepted")
	}
	e := &kubeEgress{addr: "10.96.0.9:3128"}
	e.addInstall("mem", rules)
	e.addInstall("gone", rules) // a local server: not the proxy's
	servers, err := e.proxyServers(c, kubeConnKey(c.BackendOf(c.Server("mem"))))
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 1 || len(servers["mem#install"].Rules) != 2 {
		t.Fatalf("servers = %+v", servers)
	}
	e.key, _ = egressproxy.NewKey()
	env, err := e.envTTL(nil, "mcpbox-mem-1", installServer("mem"), installTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(env["HTTP_PROXY"])
	tok, _ := u.User.Password()
	srv, exp, err := egressproxy.Verify(e.key, "mcpbox-mem-1", tok, time.Now())
	if err != nil || srv != "mem#install" || exp.After(time.Now().Add(installTokenTTL)) {
		t.Errorf("install token: %q %v %v", srv, exp, err)
	}
}

// TestKubeInstallCredentials: the install's npmrc holds the user's
// credentials for the lockfile's registries only (host-level), none for
// another registry; without a credential that applies there is none.
func TestKubeInstallCredentials(t *testing.T) {
	lock := []byte(`{"packages":{"node_modules/x":{"resolved":"https://npm.corp.example/x/-/x-1.0.0.tgz"},` +
		`"node_modules/y":{"resolved":"https://npm.corp.example/y/-/y-1.0.0.tgz"}}}`)
	other := pkginstall.NPMConfig{Auth: map[string]pkginstall.Credential{"//registry.npmjs.org/": {Token: "npm-secret"}}}
	if rc, vals, err := other.LockfileNPMRC(lock); err != nil || rc != nil || vals != nil {
		t.Errorf("another registry's token: %q %q %v", rc, vals, err)
	}
	c := pkginstall.NPMConfig{Auth: map[string]pkginstall.Credential{"//npm.corp.example/": {Token: "corp-secret"},
		"//registry.npmjs.org/": {Token: "npm-secret"}}}
	rc, vals, err := c.LockfileNPMRC(lock)
	if err != nil {
		t.Fatal(err)
	}
	if string(rc) != "//npm.corp.example/:_authToken=corp-secret\n" || len(vals) != 1 || vals[0] != "corp-secret" {
		t.Errorf("npmrc %q, values %q", rc, vals)
	}
}
