package pkginstall

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestLoadNPMConfig(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(home, ".npmrc"), []byte(`
; the user's config
registry=https://user.example/npm/
@corp:registry=https://npm.corp.example/
//npm.corp.example/:_authToken=${CORP_TOKEN}
//user.example/npm/:_auth="dXNlcjpwYXNz"
# unrelated keys are ignored
save-exact=true
`), 0o600)
	os.WriteFile(filepath.Join(project, ".npmrc"), []byte("@other:registry=http://127.0.0.1:4873\n//127.0.0.1:4873/:_authToken=proj\n"), 0o600)

	env := map[string]string{"HOME": home, "CORP_TOKEN": "corp-secret"}
	get := func(k string) string { return env[k] }
	c, err := LoadNPMConfig(get, project)
	if err != nil {
		t.Fatal(err)
	}
	want := NPMConfig{
		Registry: "https://user.example/npm/",
		Scopes:   map[string]string{"@corp": "https://npm.corp.example/", "@other": "http://127.0.0.1:4873"},
		Auth: map[string]Credential{
			"//npm.corp.example/": {Token: "corp-secret"},
			"//user.example/npm/": {Basic: "dXNlcjpwYXNz"},
			"//127.0.0.1:4873/":   {Token: "proj"},
		},
	}
	if diff := cmp.Diff(want, c, cmpopts.IgnoreUnexported(NPMConfig{})); diff != "" { // who named what: TestProjectRegistryAtAnInsideAddress
		t.Fatalf("(-want +got):\n%s", diff)
	}

	for _, tt := range []struct{ name, registry, auth string }{
		{"@corp/tool", "https://npm.corp.example/", "Bearer corp-secret"},
		{"@other/x", "http://127.0.0.1:4873/", "Bearer proj"},
		{"plain", "https://user.example/npm/", "Basic dXNlcjpwYXNz"},
		{"@unscoped-registry/x", "https://user.example/npm/", "Basic dXNlcjpwYXNz"},
	} {
		u, err := c.RegistryFor(tt.name)
		if err != nil || u.String() != tt.registry {
			t.Errorf("RegistryFor(%s) = %v, %v; want %s", tt.name, u, err, tt.registry)
			continue
		}
		cr, _ := c.CredentialFor(u.JoinPath(tt.name))
		if cr.header() != tt.auth {
			t.Errorf("credential for %s = %q, want %q", tt.name, cr.header(), tt.auth)
		}
	}
	// A credential goes to its host and path only.
	for _, raw := range []string{"https://evil.example/npm/x", "https://user.example/other/x", "http://127.0.0.1:4874/x", "https://npm.corp.example.evil/x"} {
		u, _ := url.Parse(raw)
		if cr, ok := c.CredentialFor(u); ok {
			t.Errorf("credential %+v sent to %s", cr, raw)
		}
	}

	// The environment overrides the files, either case.
	env["npm_config_registry"] = "http://127.0.0.1:9/"
	if c, _ := LoadNPMConfig(get, project); c.Registry != "http://127.0.0.1:9/" {
		t.Errorf("npm_config_registry ignored: %q", c.Registry)
	}
	delete(env, "npm_config_registry")
	env["NPM_CONFIG_USERCONFIG"] = filepath.Join(project, "nope")
	if c, _ := LoadNPMConfig(get, ""); c.Registry != "" || len(c.Auth) != 0 {
		t.Errorf("NPM_CONFIG_USERCONFIG ignored: %+v", c)
	}
	env["NPM_CONFIG_REGISTRY"] = "file:///etc"
	if _, err := LoadNPMConfig(get, ""); err == nil || !strings.Contains(err.Error(), "http(s) URL") {
		t.Errorf("a file: registry: %v", err)
	}
}

// The npmrc handed to the fetching sandbox carries the credentials of the
// registries in use and no others.
func TestNPMRCForSandbox(t *testing.T) {
	c := NPMConfig{
		Registry: "http://127.0.0.1:4873/",
		Auth: map[string]Credential{
			"//127.0.0.1:4873/":        {Token: "used"},
			"//npm.unrelated.example/": {Token: "unrelated"},
		},
	}
	u, _ := c.RegistryFor("x")
	got := string(c.npmrc([]*url.URL{u}))
	if !strings.Contains(got, "registry=http://127.0.0.1:4873/\n") || !strings.Contains(got, "//127.0.0.1:4873/:_authToken=used\n") {
		t.Errorf("npmrc lacks the registry or its token:\n%s", got)
	}
	if strings.Contains(got, "unrelated") {
		t.Errorf("npmrc carries another registry's token:\n%s", got)
	}
}

func TestResolve(t *testing.T) {
	p := &packument{Name: "x", DistTags: map[string]string{"latest": "1.2.0", "next": "2.0.0-rc.1", "broken": "9.9.9"}, Versions: map[string]npmVersion{}}
	for _, v := range []string{"0.9.0", "1.0.0", "1.2.0", "1.3.0-beta.1", "1.10.1", "2.0.0-rc.1"} {
		p.Versions[v] = npmVersion{Version: v}
	}
	for _, tt := range []struct{ spec, want, err string }{
		{spec: "latest", want: "1.2.0"},
		{spec: "next", want: "2.0.0-rc.1"},
		{spec: "1.0.0", want: "1.0.0"},
		{spec: "^1.0.0", want: "1.10.1"}, // numeric, not lexical, order
		{spec: "~1.2", want: "1.2.0"},    // not the 1.3 prerelease
		{spec: "1.x", want: "1.10.1"},
		{spec: "*", want: "1.10.1"},
		{spec: ">=0.9 <1.1", want: "1.0.0"},
		{spec: "^0.1 || ^0.9", want: "0.9.0"},
		{spec: "^3", err: `no version matches "^3" (the newest listed: 2.0.0-rc.1, 1.10.1, 1.3.0-beta.1, 1.2.0, 1.0.0, ...)`},
		{spec: "=9.9.9", err: `no version matches "9.9.9" (`}, // update's exact version, named as the config has it
		{spec: "broken", err: "does not list"},
		{spec: "not a range!", err: "neither a version"},
	} {
		v, err := p.resolve(tt.spec)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("resolve(%q) = %s, %v; want error %q", tt.spec, v.Version, err, tt.err)
			}
			continue
		}
		if err != nil || v.Version != tt.want {
			t.Errorf("resolve(%q) = %s, %v; want %s", tt.spec, v.Version, err, tt.want)
		}
	}
}

func TestNPMBins(t *testing.T) {
	for _, tt := range []struct {
		name, pj string
		want     map[string]string
		err      string
	}{
		{name: "@s/tool", pj: `{"bin":"./dist/index.js"}`, want: map[string]string{"tool": "node_modules/@s/tool/dist/index.js"}},
		{name: "t", pj: `{"bin":{"a":"bin/a.js","b":"b.js"}}`, want: map[string]string{"a": "node_modules/t/bin/a.js", "b": "node_modules/t/b.js"}},
		{name: "t", pj: `{}`, want: map[string]string{}},
		{name: "t", pj: `{"bin":"../../../etc/passwd"}`, err: "leaves the package"},
		{name: "t", pj: `{"bin":"/etc/passwd"}`, err: "leaves the package"},
		{name: "t", pj: `{"bin":{"../x":"a.js"}}`, err: "leaves the package"},
		{name: "t", pj: `{"bin":3}`, err: "neither a string nor a map"},
	} {
		got, err := npmBins([]byte(tt.pj), tt.name)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, %v; want error %q", tt.pj, got, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.pj, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.pj, diff)
		}
	}
}

func TestChooseBin(t *testing.T) {
	two := map[string]string{"a": "x", "server-memory": "y"}
	for _, tt := range []struct {
		src  Source
		bins map[string]string
		want string
		err  string
	}{
		{Source{Name: "@s/server-memory"}, two, "server-memory", ""},
		{Source{Name: "@s/other", Bin: "a"}, two, "a", ""},
		{Source{Name: "@s/other"}, map[string]string{"only": "z"}, "only", ""},
		{Source{Name: "@s/other", Version: "1.2.3"}, two, "", `has 2 bins (a, server-memory); name one, as npx does: command: [npx, -y, -p, "@s/other@1.2.3", a]`},
		{Source{Name: "@s/other", Bin: "c"}, two, "", `no bin "c"`},
		{Source{Name: "@s/other"}, nil, "", "declares no bin"},
	} {
		got, err := chooseBin(tt.src, tt.bins)
		if got != tt.want || (tt.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("chooseBin(%+v) = %q, %v; want %q, %q", tt.src, got, err, tt.want, tt.err)
		}
	}
}

func TestConfigsPrintNoSecrets(t *testing.T) {
	n := NPMConfig{Auth: map[string]Credential{"//r/": {Token: "tok-5ecret", Basic: "YmFzaWM="}}}
	p := PyPIConfig{IndexURL: "https://u:pa55@idx.example/simple/"}
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", n, n, n, n), fmt.Sprintf("%v %+v %#v %s", p, p, p, p)} {
		for _, secret := range []string{"tok-5ecret", "YmFzaWM=", "pa55"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q prints %s", s, secret)
			}
		}
	}
}
