package launch

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/kube"
	"mcpbox/internal/redact"
)

// fakeSecrets serves GET of the Secrets of namespace ns as an API server
// does: the Secret's data, 404 for one that does not exist, 403 for the
// ones in forbidden. Values may change between requests (set).
type fakeSecrets struct {
	mu        sync.Mutex
	data      map[string]map[string][]byte // guarded by mu
	forbidden map[string]bool
	gets      int // guarded by mu
}

func (f *fakeSecrets) set(name, key, v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.data[name] == nil {
		f.data[name] = map[string][]byte{}
	}
	f.data[name][key] = []byte(v)
}

func (f *fakeSecrets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name, ok := strings.CutPrefix(r.URL.Path, "/api/v1/namespaces/ns/secrets/")
	status := func(code int, reason string) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"reason": reason, "message": "secrets \"" + name + "\" " + reason})
	}
	switch {
	case !ok || r.Method != "GET":
		status(http.StatusNotFound, "NotFound")
	case f.forbidden[name]:
		status(http.StatusForbidden, "Forbidden")
	case f.data[name] == nil:
		status(http.StatusNotFound, "NotFound")
	default:
		f.gets++
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "Secret", "data": f.data[name]})
	}
}

// kubeWithSecrets is a Kube backend of namespace ns whose client talks to
// f, with secs and a book of its own.
func kubeWithSecrets(t *testing.T, f *fakeSecrets, secs []config.Secret) *Kube {
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c, err := kube.New(kube.Config{Server: srv.URL, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &Kube{o: KubeOptions{Name: "s", Client: c, Namespace: "ns", Secrets: secs, Book: &redact.Book{}}}
}

// TestKubeResolveSecrets: kubernetes: references are read through the
// API at every start (a changed value reaches the next start), go to the
// agent as env or file as `as` says, next to env: ones, and the book
// redacts them; a missing Secret or key, a forbidden read and a short
// value fail the start with one line naming the secret, never a value.
func TestKubeResolveSecrets(t *testing.T) {
	const tok, cert, local = "gh-token-0123456789abcdef", "cert-body-0123456789", "local-env-0123456789"
	t.Setenv("KUBE_UNIT_LOCAL", local)
	f := &fakeSecrets{data: map[string]map[string][]byte{}, forbidden: map[string]bool{"locked": true}}
	f.set("gh", "token", tok+"\n")
	f.set("gh", "cert", cert)
	f.set("gh", "short", "abc")
	k := kubeWithSecrets(t, f, []config.Secret{
		{Name: "GH_TOKEN", From: "kubernetes:gh/token"},
		{Name: "CERT", From: "kubernetes:gh/cert", As: config.SecretAsFile},
		{Name: "LOCAL", From: "env:KUBE_UNIT_LOCAL"},
	})
	ctx := context.Background()
	env, files, _, err := k.resolveSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if env["GH_TOKEN"] != tok || string(files["CERT"]) != cert || env["LOCAL"] != local || len(env) != 2 || len(files) != 1 {
		t.Errorf("env %q files %q", env, files)
	}
	for _, v := range []string{tok, cert, local} {
		if got := k.o.Book.String("echo " + v); strings.Contains(got, v) {
			t.Errorf("the book does not redact %q: %q", v, got)
		}
	}
	f.set("gh", "token", "gh-token-rotated-9876543210")
	if env, _, _, err = k.resolveSecrets(ctx); err != nil || env["GH_TOKEN"] != "gh-token-rotated-9876543210" {
		t.Errorf("after the Secret changed: %q, %v", env["GH_TOKEN"], err)
	}
	if f.gets != 4 {
		t.Errorf("%d reads of the Secret in two starts, want 4 (one per reference per start)", f.gets)
	}
	for _, tc := range []struct{ from, want string }{
		{"kubernetes:nope/token", "secret X: kubernetes Secret ns/nope does not exist"},
		{"kubernetes:gh/nokey", `secret X: kubernetes Secret ns/gh has no key "nokey"`},
		{"kubernetes:locked/token", "secret X: kubernetes Secret ns/locked: the gateway may not read it (403 forbidden)"},
		{"kubernetes:gh/short", "secret X: secret from kubernetes:gh/short is shorter than 8 bytes"},
	} {
		k := kubeWithSecrets(t, f, []config.Secret{{Name: "X", From: tc.from}})
		_, _, _, err := k.resolveSecrets(ctx)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "abc") {
			t.Errorf("%s: %v, want one line starting %q", tc.from, err, tc.want)
		}
	}
}

// TestKubeResolveInjectedSecretRef: a kubernetes: reference added at the
// proxy (inject) is read through the API at every start too: its value
// goes to the proxy's registration (the Credential), never to the pod's
// start request, and the book redacts it; a missing key fails the start.
func TestKubeResolveInjectedSecretRef(t *testing.T) {
	const tok = "sk-live-0123456789abcdef"
	f := &fakeSecrets{data: map[string]map[string][]byte{}}
	f.set("api", "key", tok)
	in := &config.Inject{Hosts: []string{"api.example.com"}, Header: "X-Key"}
	k := kubeWithSecrets(t, f, []config.Secret{{Name: "API_KEY", From: "kubernetes:api/key", Inject: in}})
	ctx := context.Background()
	env, files, proxied, err := k.resolveSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(env) != 0 || len(files) != 0 {
		t.Errorf("the pod's start request got %q %q", env, files)
	}
	if len(proxied) != 1 || proxied[0].Cred.Value != tok || proxied[0].Cred.Name != "API_KEY" ||
		proxied[0].Cred.Header != "X-Key" || len(proxied[0].Cred.Hosts) != 1 {
		t.Fatalf("proxied %+v", proxied)
	}
	if got := k.o.Book.String("echo " + tok); strings.Contains(got, tok) {
		t.Errorf("the book does not redact the value: %q", got)
	}
	f.set("api", "key", "sk-live-rotated-9876543210")
	if _, _, proxied, err = k.resolveSecrets(ctx); err != nil || proxied[0].Cred.Value != "sk-live-rotated-9876543210" {
		t.Errorf("after the Secret changed: %v", err)
	}
	k = kubeWithSecrets(t, f, []config.Secret{{Name: "API_KEY", From: "kubernetes:api/nokey", Inject: in}})
	if _, _, _, err := k.resolveSecrets(ctx); err == nil || !strings.HasPrefix(err.Error(), `secret API_KEY: kubernetes Secret ns/api has no key "nokey"`) {
		t.Errorf("a missing key: %v", err)
	}
}
