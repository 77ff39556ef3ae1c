package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.yaml.in/yaml/v3"

	"mcpbox/internal/kube"
)

// applyRBAC applies, as the cluster's admin, what `mcpbox ARGS` (kube
// rbac ...) prints, replacing a Role and RoleBinding of that name.
func (e *kubeEnv) applyRBAC(t *testing.T, ctx context.Context, args ...string) {
	t.Helper()
	r := mode{uid: -1}.mcpbox(t, 60*time.Second, "", args...)
	if r.code != 0 {
		t.Fatalf("mcpbox %s: %s", strings.Join(args, " "), r)
	}
	docs := strings.Split(r.stdout, "---\n")
	for i, plural := range []string{"roles", "rolebindings"} {
		res := kube.Resource{API: "/apis/rbac.authorization.k8s.io/v1", Plural: plural}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(docs[i]), &obj); err != nil {
			t.Fatal(err)
		}
		if err := e.client.Delete(ctx, res, e.ns, "mcpbox-gateway"); err != nil {
			t.Fatal(err)
		}
		if err := e.client.Create(ctx, res, e.ns, obj, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKubeSecretRef: a server on kubernetes gets secrets from an existing
// Secret (kubernetes:SECRET/KEY), which the gateway reads through the API
// with its own identity, bound to exactly the Role `mcpbox kube rbac`
// prints. Without get on the Secret (the Role printed without --config)
// the start fails closed with a 403 line; with the Role of --config the
// server gets one key as env and one as a file, and both come back
// redacted to the client and in the audit. A missing Secret or key fails
// that server's start with one clear line, as does a key taken away
// before the next start; doctor reports each.
func TestKubeSecretRef(t *testing.T) {
	e := kubeCluster(t)
	agent, server := kubeBins(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const tok, cert = "gh-token-from-a-k8s-secret-0123456789", "cert-from-a-k8s-secret-9876543210"
	sec := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "gh"},
		Data: map[string][]byte{"token": []byte(tok), "cert": []byte(cert)}}
	if err := e.client.Create(ctx, kube.Secrets, e.ns, sec, nil); err != nil {
		t.Fatal(err)
	}
	user := "gw-" + e.ns
	srv := func(name string, secrets map[string]any) map[string]any {
		return map[string]any{"command": []string{server, "-name", name}, "tools": map[string]any{"allow": []string{"*"}}, "secrets": secrets}
	}
	c := map[string]any{
		"version": 1, "state_dir": filepath.Join(e.dir, "state"), "audit": map[string]string{"jsonl": filepath.Join(e.dir, "audit.jsonl")},
		"clients": []map[string]any{{"name": "alice", "token": map[string]string{"from": "env:TOK_ALICE"}}},
		"backend": map[string]any{"kind": "kubernetes", "namespace": e.ns, "kubeconfig": e.cluster.UserKubeconfig(t, user),
			"agent_path": agent, "image": "mcpbox.test/base:1"},
		"servers": map[string]any{
			"k": srv("k", map[string]any{"GH_TOKEN": map[string]string{"from": "kubernetes:gh/token"},
				"CERT": map[string]string{"from": "kubernetes:gh/cert", "as": "file"}}),
			"nokey":    srv("nokey", map[string]any{"X": map[string]string{"from": "kubernetes:gh/nokey"}}),
			"nosecret": srv("nosecret", map[string]any{"X": map[string]string{"from": "kubernetes:absent/token"}}),
		},
	}
	e.writeConfig(t, c)
	// The Role printed without --config reads no Secret: every start
	// fails closed, saying why in one line.
	e.applyRBAC(t, ctx, "kube", "rbac", "--namespace", e.ns, "--subject", user)
	g := e.serve(t)
	hc := &http.Client{Transport: gwBearer{token: "alice-token-0123456789abcdef", base: gwHTTP.Transport}}
	if sess, err := gwConnectErr(ctx, g.url, hc, nil, gwLegacy); err == nil {
		sess.Close()
		t.Fatal("a session started with no server able to read its Secret")
	} else if want := "starting server k: secret CERT: kubernetes Secret " + e.ns + "/gh: the gateway may not read it (403 forbidden)"; !strings.Contains(err.Error(), want) {
		t.Fatalf("connecting without get on the Secret: %v, want %q", err, want)
	}
	// The Role of `kube rbac --config`: get on gh and absent, by name.
	e.applyRBAC(t, ctx, "kube", "rbac", "--config", e.config, "--subject", user)
	var alice *mcp.ClientSession
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		sess, err := gwConnectErr(ctx, g.url, hc, nil, gwLegacy)
		if err == nil {
			alice = sess
			t.Cleanup(func() { gwClose(t, sess) })
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session 30s after the Role allowed get on gh: %v", err)
		}
	}
	for tool, args := range map[string]map[string]any{"k__getenv": {"text": "GH_TOKEN"}, "k__read_any": {"path": "/run/secrets/CERT"}} {
		got, err := gwCall(ctx, alice, tool, args)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if strings.Contains(got, tok) || strings.Contains(got, cert) || !strings.Contains(got, "REDACTED") {
			t.Errorf("%s through the gateway = %q, want the Secret's value redacted", tool, got)
		}
	}
	// The other two servers: a key or a Secret that is not there.
	for _, want := range []string{
		`starting server nokey: secret X: kubernetes Secret ` + e.ns + `/gh has no key \"nokey\"`,
		"starting server nosecret: secret X: kubernetes Secret " + e.ns + "/absent does not exist",
	} {
		if !strings.Contains(g.logs.String(), want) {
			t.Errorf("the gateway's log lacks %q", want)
		}
	}
	// Nothing of the values in the pods' spec, the audit, the log.
	raw, err := json.Marshal(e.pods(t))
	if err != nil {
		t.Fatal(err)
	}
	jsonl, err := os.ReadFile(filepath.Join(e.dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, rec := range auDecode(t, string(jsonl)) {
		if rec.str("event") == "call" && rec.str("server") == "k" {
			calls++
		}
	}
	if calls < 2 {
		t.Errorf("%d call records of k in the audit, want the 2 calls", calls)
	}
	for what, text := range map[string]string{"the pods": string(raw), "the audit": string(jsonl), "the gateway's log": g.logs.String()} {
		if strings.Contains(text, tok) || strings.Contains(text, cert) {
			t.Errorf("%s hold a value of the Secret", what)
		}
	}
	// doctor, as the gateway's user, checks each referenced Secret.
	r := mode{uid: -1}.mcpbox(t, 90*time.Second, "", "doctor", "--backend", "kubernetes", "--config", e.config)
	for _, want := range []string{
		"secret         ok      " + e.ns + "/gh has key token and the gateway may read it",
		"secret         FAILED  kubernetes Secret " + e.ns + "/absent does not exist",
		"secret         FAILED  kubernetes Secret " + e.ns + `/gh has no key "nokey"`,
		"rbac           ok",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("mcpbox doctor lacks %q:\n%s", want, r)
		}
	}
	// A changed Secret reaches the next start: with its key taken away,
	// `secrets rotate` cannot renew k's pod, and the next call's start
	// fails closed saying so.
	if err := e.client.Patch(ctx, kube.Secrets, e.ns, "gh", map[string]any{"data": map[string]any{"token": nil}}, nil); err != nil {
		t.Fatal(err)
	}
	if r = (mode{uid: -1}).mcpbox(t, 90*time.Second, "", "secrets", "rotate", "k/GH_TOKEN", "--config", e.config); r.code != 0 {
		t.Fatalf("mcpbox secrets rotate: %s", r)
	}
	want := "starting server k: secret GH_TOKEN: kubernetes Secret " + e.ns + `/gh has no key "token"`
	if got, err := gwCall(ctx, alice, "k__getenv", map[string]any{"text": "GH_TOKEN"}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a call after the key went: %q, %v; want %q", got, err, want)
	}
	// mcpbox secrets lists the source with its namespace.
	r = mode{uid: -1}.mcpbox(t, 60*time.Second, "", "secrets", "--config", e.config)
	if want := "kubernetes:gh/token (namespace " + e.ns + ")"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("mcpbox secrets: %s, want %q", r, want)
	}
}
