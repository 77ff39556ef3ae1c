package pkginstall

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"mcpbox/internal/egress"
)

// DefaultNPMRegistry is npm's public registry.
const DefaultNPMRegistry = "https://registry.npmjs.org/"

// NPMConfig is the part of the user's npm configuration an install needs:
// which registry serves which scope, and the credentials for them. The
// zero value is the public registry without credentials.
type NPMConfig struct {
	// Registry is the default registry URL; empty means
	// DefaultNPMRegistry.
	Registry string
	// Scopes maps "@scope" to its registry URL (`@scope:registry=`).
	Scopes map[string]string
	// Auth maps a "nerf dart" (`//host[:port]/path/`, npm's key for
	// per-registry settings) to its credential. The installer sends it to
	// that registry only, and hands it to npm in the fetching sandbox as a
	// secret file; it never reaches install scripts or a server sandbox.
	Auth map[string]Credential

	// project maps "registry" and the scopes ("@scope") whose registry
	// the project's .npmrc names to that URL; user, the registry URLs the
	// user's own configuration names to their key: a registry the project
	// alone names is not trusted at a non-public address (registries).
	project, user map[string]string
}

// Credential is one registry's authentication.
type Credential struct {
	Token string // _authToken: sent as "Bearer TOKEN"
	Basic string // _auth: base64 "user:password", sent as "Basic ..."
}

// LoadNPMConfig reads the registry settings npm itself would use, from
// lowest to highest precedence: the user config (NPM_CONFIG_USERCONFIG,
// else HOME/.npmrc), the project's .npmrc in projectDir (if not empty),
// then the environment (npm_config_registry, either case). getenv looks
// up environment variables (os.Getenv in production); `${VAR}` in a value
// of the user config is expanded through it as npm does. A missing file
// is no error.
//
// The project is not trusted, and what its .npmrc names is fetched from
// the host with the user's credentials: a `${VAR}` there would send the
// user's environment (a cloud key, a secret mcpbox resolves from env:)
// to a registry of the project's choosing, as a token or in the
// registry's URL. So the project's .npmrc may name registries and carry
// literal tokens, but a `${` in one of its values is refused, naming the
// line; such a line belongs in the user config. (npm expands them, and
// running npm in a hostile checkout leaks the same way.)
func LoadNPMConfig(getenv func(string) string, projectDir string) (NPMConfig, error) {
	c := NPMConfig{Scopes: map[string]string{}, Auth: map[string]Credential{}}
	env := func(k string) string {
		if v := getenv(strings.ToLower(k)); v != "" {
			return v
		}
		return getenv(strings.ToUpper(k))
	}
	user := env("npm_config_userconfig")
	if user == "" && getenv("HOME") != "" {
		user = filepath.Join(getenv("HOME"), ".npmrc")
	}
	type file struct {
		path    string
		trusted bool // the user's: ${VAR} is expanded
	}
	files := []file{{user, true}}
	if projectDir != "" {
		p := filepath.Join(projectDir, ".npmrc")
		if !sameFile(p, user) { // the home dir as the project: the user's own
			files = append(files, file{p, false})
		}
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		data, err := os.ReadFile(f.path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("reading npm config: %w", err)
		}
		expand := getenv
		if !f.trusted {
			expand = nil
		}
		if err := c.parse(data, expand); err != nil {
			return c, fmt.Errorf("reading npm config %s: %w", f.path, err)
		}
	}
	if r := env("npm_config_registry"); r != "" {
		c.Registry = r
		c.named("registry", r, false)
	}
	if c.Registry != "" {
		if _, err := registryURL(c.Registry); err != nil {
			return c, err
		}
	}
	return c, nil
}

// sameFile reports whether paths a and b name one existing file.
func sameFile(a, b string) bool {
	if b == "" {
		return false
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// parse reads one .npmrc (ini lines; ';' and '#' comments). getenv
// expands ${VAR} in values; nil: the file is the project's, and a value
// with "${" is refused (LoadNPMConfig).
func (c *NPMConfig) parse(data []byte, getenv func(string) string) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue // npm reads a bare key as "true"; none matters here
		}
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"`)
		if getenv == nil {
			if strings.Contains(v, "${") && npmKeyUsed(k) {
				return fmt.Errorf("line %d (%s): the project's .npmrc may not expand environment variables: "+
					"the project is not trusted with your environment; put this line in your own ~/.npmrc (or NPM_CONFIG_USERCONFIG)", n, k)
			}
		} else {
			v = expandEnv(v, getenv)
		}
		switch {
		case k == "registry":
			c.Registry = v
			c.named(k, v, getenv == nil)
		case strings.HasPrefix(k, "@") && strings.HasSuffix(k, ":registry"):
			scope := strings.TrimSuffix(k, ":registry")
			c.Scopes[scope] = v
			c.named(scope, v, getenv == nil)
		case strings.HasPrefix(k, "//") && strings.HasSuffix(k, ":_authToken"):
			nerf := nerfDart(strings.TrimSuffix(k, ":_authToken"))
			cr := c.Auth[nerf]
			cr.Token = v
			c.Auth[nerf] = cr
		case strings.HasPrefix(k, "//") && strings.HasSuffix(k, ":_auth"):
			nerf := nerfDart(strings.TrimSuffix(k, ":_auth"))
			cr := c.Auth[nerf]
			cr.Basic = v
			c.Auth[nerf] = cr
		}
	}
	return sc.Err()
}

// named records who named url as the registry of key ("registry" or a
// scope) last: the project's .npmrc (byProject) or the user.
func (c *NPMConfig) named(key, url string, byProject bool) {
	if c.project == nil {
		c.project, c.user = map[string]string{}, map[string]string{}
	}
	if byProject {
		c.project[key] = url
		return
	}
	delete(c.project, key)
	c.user[url] = key
}

// byUser reports whether the registry of key, url, is one the user's
// configuration names (or one made without LoadNPMConfig).
func (c NPMConfig) byUser(key, url string) bool {
	_, byProject := c.project[key]
	_, named := c.user[url]
	return !byProject || named
}

// projectRegistryHint is what to do when the host refused to fetch
// package name's metadata from a non-public address that only the
// project's .npmrc names: that setting belongs in the user's own
// ~/.npmrc, which is trusted with it. "" for any other error.
func (c NPMConfig) projectRegistryHint(name string, err error) string {
	if !errors.Is(err, egress.ErrPrivateAddress) {
		return ""
	}
	key, u := "registry", c.Registry
	if scope, _, ok := strings.Cut(name, "/"); ok && strings.HasPrefix(scope, "@") && c.Scopes[scope] != "" {
		key, u = scope+":registry", c.Scopes[scope]
	}
	if c.byUser(strings.TrimSuffix(key, ":registry"), u) {
		return ""
	}
	return fmt.Sprintf(" (the project's .npmrc names this registry, and the project is not trusted with a non-public address: "+
		"move its %s= line to your own ~/.npmrc (or NPM_CONFIG_USERCONFIG), the host's trusted config)", key)
}

// npmKeyUsed reports whether parse uses key k (the others are npm's
// own business: mcpbox never reads them).
func npmKeyUsed(k string) bool {
	return k == "registry" || strings.HasPrefix(k, "@") && strings.HasSuffix(k, ":registry") ||
		strings.HasPrefix(k, "//") && (strings.HasSuffix(k, ":_authToken") || strings.HasSuffix(k, ":_auth"))
}

// nerfDart gives a per-registry key its trailing slash, as npm does.
func nerfDart(k string) string {
	if strings.HasSuffix(k, "/") {
		return k
	}
	return k + "/"
}

// expandEnv replaces ${VAR} as npm does (only the braced form).
func expandEnv(v string, getenv func(string) string) string {
	var b strings.Builder
	for {
		i := strings.Index(v, "${")
		if i < 0 {
			break
		}
		j := strings.Index(v[i:], "}")
		if j < 0 {
			break
		}
		b.WriteString(v[:i])
		b.WriteString(getenv(v[i+2 : i+j]))
		v = v[i+j+1:]
	}
	b.WriteString(v)
	return b.String()
}

// RegistryFor is the registry URL serving package name (its scope's, or
// the default), with a trailing slash.
func (c NPMConfig) RegistryFor(name string) (*url.URL, error) {
	r := c.Registry
	if scope, _, ok := strings.Cut(name, "/"); ok && strings.HasPrefix(scope, "@") {
		if s := c.Scopes[scope]; s != "" {
			r = s
		}
	}
	if r == "" {
		r = DefaultNPMRegistry
	}
	return registryURL(r)
}

func registryURL(r string) (*url.URL, error) {
	u, err := url.Parse(r)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("npm registry %q: want an http(s) URL without credentials", r)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// CredentialFor is the credential npm would send with a request to u: the
// one whose nerf dart is the longest prefix of u's "//host[:port]/path".
func (c NPMConfig) CredentialFor(u *url.URL) (Credential, bool) {
	p := u.Path
	if i := strings.LastIndex(p, "/"); i >= 0 {
		p = p[:i+1]
	} else {
		p = "/"
	}
	for {
		if cr, ok := c.Auth["//"+u.Host+p]; ok {
			return cr, true
		}
		if p == "/" {
			return Credential{}, false
		}
		p = p[:strings.LastIndex(strings.TrimSuffix(p, "/"), "/")+1]
	}
}

// String keeps the credential out of logs and error messages: %v and %+v
// of a Credential, or of an NPMConfig holding one, print no secret.
func (cr Credential) String() string { return "[credential redacted]" }

// GoString does the same for %#v.
func (cr Credential) GoString() string { return cr.String() }

// header is the Authorization header value of a credential.
func (cr Credential) header() string {
	if cr.Token != "" {
		return "Bearer " + cr.Token
	}
	if cr.Basic != "" {
		return "Basic " + cr.Basic
	}
	return ""
}

// npmrc is the config file given to npm in the fetching sandbox: the
// registries, and the credentials of exactly those registries.
func (c NPMConfig) npmrc(regs []*url.URL) []byte {
	var b bytes.Buffer
	def, _ := c.RegistryFor("x")
	fmt.Fprintf(&b, "registry=%s\n", def)
	for scope := range c.Scopes {
		u, err := c.RegistryFor(scope + "/x")
		if err == nil {
			fmt.Fprintf(&b, "%s:registry=%s\n", scope, u)
		}
	}
	seen := map[string]bool{}
	for _, u := range regs {
		cr, ok := c.CredentialFor(u)
		if !ok {
			continue
		}
		nerf := "//" + u.Host + u.Path
		if seen[nerf] {
			continue
		}
		seen[nerf] = true
		if cr.Token != "" {
			fmt.Fprintf(&b, "%s:_authToken=%s\n", nerf, cr.Token)
		} else if cr.Basic != "" {
			fmt.Fprintf(&b, "%s:_auth=%s\n", nerf, cr.Basic)
		}
	}
	return b.Bytes()
}
