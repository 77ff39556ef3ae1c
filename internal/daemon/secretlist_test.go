package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeSecretsConfig = `version: 1
backend: {kind: kubernetes, namespace: tools, kubeconfig: /k/config, image: r/b:1}
servers:
  a:
    command: [a]
    secrets:
      GH: {from: "kubernetes:gh/token"}
      CA: {from: "kubernetes:ca/pem", as: file}
      L: {from: "env:L"}
  b:
    command: [b]
    backend: {namespace: other}
    secrets: {X: {from: "kubernetes:elsewhere/k"}}
`

func writeConfig(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mcpbox.yaml")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSecretListKube: `mcpbox secrets` shows a kubernetes: reference with
// the namespace its Secret is read in.
func TestSecretListKube(t *testing.T) {
	p := writeConfig(t, kubeSecretsConfig)
	c, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range SecretList(c, p) {
		got[r.ID] = r.Source() + " as " + r.As
	}
	for id, want := range map[string]string{
		"a/GH": "kubernetes:gh/token (namespace tools) as env",
		"a/CA": "kubernetes:ca/pem (namespace tools) as file",
		"a/L":  "env:L as env",
		"b/X":  "kubernetes:elsewhere/k (namespace other) as env",
	} {
		if got[id] != want {
			t.Errorf("%s: %q, want %q", id, got[id], want)
		}
	}
}

// TestSecretListOAuth: the references of a remote server's pre-registered
// OAuth client and of the token store's key are listed with the rest, and
// so is a key written in a remote server's url.
func TestSecretListOAuth(t *testing.T) {
	p := writeConfig(t, `version: 1
oauth: {store_key: {from: "env:MCPBOX_OAUTH_KEY"}}
servers:
  keyed:
    url: https://mcp.zapier.com/api/mcp/s/NjM0ZjUxYjAtOTk4Zi00Y2Q1LWI3ZTEtMzA1/mcp
  plain:
    url: https://mcp.example.com/v1/2025-06-18/mcp
  r:
    url: https://mcp.example.com/mcp
    oauth:
      issuer: https://as.example.com
      client_id: {from: "env:DEMO_CID"}
      client_secret: {from: "file:/run/demo-secret"}
`)
	c, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range SecretList(c, p) {
		got[r.ID] = r.Source() + " as " + r.As
	}
	for id, want := range map[string]string{
		"r/oauth.client_id":     "env:DEMO_CID as oauth client",
		"r/oauth.client_secret": "file:/run/demo-secret as oauth client",
		"oauth.store_key":       "env:MCPBOX_OAUTH_KEY as oauth store key",
		"keyed/(url)":           "written in the config as url", // a key in the url's path
	} {
		if got[id] != want {
			t.Errorf("%s: %q, want %q (all: %v)", id, got[id], want, got)
		}
	}
	for _, id := range []string{"plain/(url)", "r/(url)"} {
		if _, ok := got[id]; ok {
			t.Errorf("%s listed: its url holds no key", id)
		}
	}
}

// TestKubeRBACConfig: with a config, the Role is in the config's
// namespace and may get exactly the Secrets referenced there; without,
// it gets none.
func TestKubeRBACConfig(t *testing.T) {
	p := writeConfig(t, kubeSecretsConfig)
	y, err := KubeRBAC(p, "", "gw")
	if err != nil {
		t.Fatal(err)
	}
	s := string(y)
	if !strings.Contains(s, "namespace: tools") || !strings.Contains(s, "resourceNames:\n      - ca\n      - gh\n") || strings.Contains(s, "elsewhere") {
		t.Errorf("the Role for tools:\n%s", s)
	}
	if y, err = KubeRBAC(p, "other", "gw"); err != nil || !strings.Contains(string(y), "      - elsewhere\n") || strings.Contains(string(y), "- gh\n") {
		t.Errorf("the Role for other (%v):\n%s", err, y)
	}
	if y, err = KubeRBAC("", "", "gw"); err != nil || strings.Contains(string(y), "resourceNames") || !strings.Contains(string(y), "namespace: mcp") {
		t.Errorf("the Role without a config (%v):\n%s", err, y)
	}
	if _, err := KubeRBAC(filepath.Join(t.TempDir(), "none.yaml"), "", "gw"); err == nil {
		t.Error("a missing config gave a Role")
	}
	local := writeConfig(t, "version: 1\nservers:\n  a: {command: [a]}\n")
	if y, err := KubeRBAC(local, "", "gw"); err == nil || !strings.Contains(err.Error(), "has no backend of kind kubernetes") {
		t.Errorf("a config without a kubernetes backend: %v\n%s", err, y)
	}
}

// A login's --client must name an identity serve can give a session:
// the local user, a configured client, an oidc. one with
// listen.http.oauth; any other login would never be used.
func TestLoginKnownIdentity(t *testing.T) {
	plain, err := LoadConfig(writeConfig(t, "version: 1\nservers:\n  r: {url: https://mcp.example.com/mcp, oauth: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		client string
		ok     bool
	}{{"", true}, {"_local", true}, {"nobody", false}, {"oidc.", false}, {"oidc.alice", false}} {
		if err := knownIdentity(plain, tc.client); (err == nil) != tc.ok {
			t.Errorf("without clients, --client %q: %v", tc.client, err)
		}
	}
	jwt, err := LoadConfig(writeConfig(t, `version: 1
clients: [{name: a, token: {from: env:MCPBOX_TEST_CLIENT_TOKEN}}]
listen:
  http:
    oauth: {issuer: https://idp.example.com, resource: https://gw.example.com/mcp}
servers:
  r: {url: https://mcp.example.com/mcp, oauth: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		client string
		ok     bool
	}{{"", true}, {"a", true}, {"b", false}, {"oidc.alice", true}, {"oidc.", false}} {
		if err := knownIdentity(jwt, tc.client); (err == nil) != tc.ok {
			t.Errorf("with clients and JWTs, --client %q: %v", tc.client, err)
		}
	}
	err = knownIdentity(plain, "nobody")
	if err == nil || !strings.Contains(err.Error(), "the local user (no --client)") {
		t.Errorf("the refusal does not name the identities: %v", err)
	}
}
