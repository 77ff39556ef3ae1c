package pkginstall

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"mcpbox/internal/egress"
)

// Size bounds of what a registry may send; past them the fetch fails
// rather than filling memory or disk.
const (
	maxMetadata = 64 << 20  // a packument (popular packages reach ~30 MiB)
	maxTarball  = 512 << 20 // one package tarball
)

// tooLarge is the error for what u sends past limit: mcpbox's bound,
// not the registry's.
func tooLarge(u *url.URL, limit int64) error {
	return fmt.Errorf("%s is larger than the %d MiB mcpbox reads from a registry for it", redactURL(u), limit>>20)
}

// npmVersion is the part of a packument's version entry an install needs.
type npmVersion struct {
	Version string `json:"version"`
	Dist    struct {
		Integrity string `json:"integrity"`
		Shasum    string `json:"shasum"`
		Tarball   string `json:"tarball"`
	} `json:"dist"`
	Deprecated json.RawMessage `json:"deprecated"`
}

type packument struct {
	Name     string                `json:"name"`
	DistTags map[string]string     `json:"dist-tags"`
	Versions map[string]npmVersion `json:"versions"`
}

// registry talks to npm registries from the host, with the user's
// credentials; nothing here runs in a sandbox.
type registry struct {
	cfg    NPMConfig
	client *http.Client
}

// get fetches u with the npm credential for u, up to limit bytes.
func (r *registry) get(ctx context.Context, u *url.URL, accept string, limit int64) ([]byte, error) {
	auth := ""
	if cr, ok := r.cfg.CredentialFor(u); ok {
		auth = cr.header()
	}
	return r.fetch(ctx, u, accept, auth, limit)
}

// getBasic fetches u, sending the user and password of the index URL idx
// only when u is on idx's scheme and host.
func (r *registry) getBasic(ctx context.Context, u, idx *url.URL, accept string, limit int64) ([]byte, error) {
	auth := ""
	if idx.User != nil && u.Scheme == idx.Scheme && u.Host == idx.Host {
		p, _ := idx.User.Password()
		auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(idx.User.Username()+":"+p))
	}
	return r.fetch(ctx, u, accept, auth, limit)
}

func (r *registry) fetch(ctx context.Context, u *url.URL, accept, auth string, limit int64) ([]byte, error) {
	plain := *u
	plain.User = nil
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, plain.String(), nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, redactErr(err, u)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, ErrNotFound
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &RegistryError{URL: redactURL(u), Status: resp.Status}
	}
	if resp.ContentLength > limit { // said before it is read
		return nil, tooLarge(u, limit)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, tooLarge(u, limit)
	}
	return body, nil
}

// redactErr keeps a URL's password out of a client error.
func redactErr(err error, u *url.URL) error {
	if p, ok := u.User.Password(); ok && p != "" && strings.Contains(err.Error(), p) {
		return errors.New(strings.ReplaceAll(err.Error(), p, "***"))
	}
	return err
}

// packument fetches a package's metadata (npm's abbreviated form when the
// registry has it).
func (r *registry) packument(ctx context.Context, name string) (*packument, *url.URL, error) {
	reg, err := r.cfg.RegistryFor(name)
	if err != nil {
		return nil, nil, err
	}
	// npm escapes the scope's slash: /@scope%2fname.
	u := *reg
	u.Path = reg.Path + name
	u.RawPath = reg.EscapedPath() + strings.Replace(name, "/", "%2f", 1)
	body, err := r.get(ctx, &u, "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8", maxMetadata)
	if errors.Is(err, ErrNotFound) {
		return nil, reg, fmt.Errorf("npm package %s: %w at %s", name, ErrNotFound, redactURL(reg))
	}
	if err != nil {
		return nil, reg, fmt.Errorf("fetching npm metadata of %s: %w%s", name, err, r.cfg.projectRegistryHint(name, err))
	}
	var p packument
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, reg, fmt.Errorf("reading npm metadata of %s: %w", name, err)
	}
	if p.Name != name {
		return nil, reg, fmt.Errorf("npm metadata of %s names package %q", name, p.Name)
	}
	return &p, reg, nil
}

// resolve picks the version of p that spec (an exact version, a dist-tag
// such as "latest", or a range) names: the highest one satisfying the
// range, where prereleases match only ranges that name one, as in npm.
func (p *packument) resolve(spec string) (npmVersion, error) {
	if v, ok := p.Versions[spec]; ok {
		return v, nil
	}
	if tag, ok := p.DistTags[spec]; ok {
		if v, ok := p.Versions[tag]; ok {
			return v, nil
		}
		return npmVersion{}, fmt.Errorf("npm package %s: dist-tag %s names %s, which the registry does not list", p.Name, spec, tag)
	}
	c, err := parseRange(spec)
	if err != nil {
		return npmVersion{}, fmt.Errorf("npm package %s: %q is neither a version, a dist-tag nor a range", p.Name, spec)
	}
	var best *semVersion
	var bestKey string
	for k := range p.Versions {
		v, ok := parseVersion(k)
		if !ok || !c.check(v) {
			continue
		}
		if best == nil || v.compare(*best) > 0 {
			best, bestKey = &v, k
		}
	}
	if best == nil {
		type listed struct {
			v    semVersion
			name string
		}
		var known []listed
		for k := range p.Versions {
			if v, ok := parseVersion(k); ok {
				known = append(known, listed{v, k})
			}
		}
		slices.SortFunc(known, func(a, b listed) int { return b.v.compare(a.v) }) // the newest first
		var newest []string
		for _, l := range known[:min(5, len(known))] {
			newest = append(newest, l.name)
		}
		more := ""
		if len(known) > 5 {
			more = ", ..."
		}
		// "=1.2.3" is how update asks for an exact version anew: the
		// config says 1.2.3.
		return npmVersion{}, fmt.Errorf("npm package %s: no version matches %q (the newest listed: %s%s)", p.Name, strings.TrimPrefix(spec, "="), strings.Join(newest, ", "), more)
	}
	return p.Versions[bestKey], nil
}

// tarball downloads v's tarball and checks it against want (an SRI
// string).
func (r *registry) tarball(ctx context.Context, name string, v npmVersion, want string) ([]byte, error) {
	u, err := url.Parse(v.Dist.Tarball)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("npm package %s@%s: tarball URL %q is not http(s)", name, v.Version, v.Dist.Tarball)
	}
	if err := checkArtifactURL(u, r.cfg.registries()); err != nil {
		return nil, fmt.Errorf("npm package %s@%s: tarball: %w", name, v.Version, err)
	}
	data, err := r.get(ctx, u, "", maxTarball)
	if err != nil {
		return nil, fmt.Errorf("downloading npm package %s@%s: %w", name, v.Version, err)
	}
	if err := checkIntegrity(data, want); err != nil {
		return nil, fmt.Errorf("npm package %s@%s: %w", name, v.Version, err)
	}
	return data, nil
}

// redactURL drops what a URL might carry beyond host and path.
func redactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// checkArtifactURL refuses an archive URL that registry data named (a
// packument's dist.tarball, a lockfile's resolved URL, an index page's
// file link) whose host is an IP address other than a configured
// registry's own host and port (trusted: the user's configuration). The
// registry is not trusted, and the host fetches that URL itself, and the
// install sandbox's egress allows its host: an address rule would let it
// reach this host's loopback services, the LAN or cloud metadata
// (169.254.169.254), which the egress proxy refuses to a name that
// resolves there.
//
// "Address" is decided as the egress proxy decides it (egress.ParseHost):
// 169.254.169.254. (a trailing dot), 2130706433 or 0x7f.1 are addresses
// there, and were names here, so they became address rules of the
// install's egress. A host the proxy cannot read is refused too.
func checkArtifactURL(u *url.URL, trusted []*url.URL) error {
	_, ip, err := egress.ParseHost(u.Hostname())
	if err == nil && !ip.IsValid() {
		return nil // a name: the egress proxy checks what it resolves to
	}
	port := effectivePort(u)
	for _, t := range trusted {
		if t == nil || effectivePort(t) != port {
			continue
		}
		if _, tip, terr := egress.ParseHost(t.Hostname()); err == nil && terr == nil && tip.IsValid() && tip == ip {
			return nil
		}
	}
	return fmt.Errorf("the registry names %s, an address that is no configured registry's: refused (an address could reach this host's network or cloud metadata)", redactURL(u))
}

// effectivePort is u's port, or its scheme's.
func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return map[string]string{"http": "80", "https": "443"}[u.Scheme]
}

// registries are the npm registries the user's configuration names (the
// default one included): the only hosts an artifact's URL may name by
// address.
//
// A registry only the project's .npmrc names is not one of them: the
// project is not trusted, and what it names may be used only where it
// resolves to a public address (the host's fetches are checked at dial
// time, egress.HostFetch; the fetching sandbox's egress gets no rule
// for it if it is an address, fetchRegistries). Else a cloned repository's
// `registry=http://169.254.169.254/latest/meta-data/` would have the
// host fetch cloud metadata, or its loopback services, at paths of its
// choosing. The user's own .npmrc (or npm_config_registry) names a
// registry on loopback or the LAN.
func (c NPMConfig) registries() []*url.URL {
	rs := []string{DefaultNPMRegistry}
	if c.byUser("registry", c.Registry) {
		rs = append(rs, c.Registry)
	}
	for scope, r := range c.Scopes {
		if c.byUser(scope, r) {
			rs = append(rs, r)
		}
	}
	var out []*url.URL
	for _, r := range rs {
		if u, err := registryURL(r); err == nil {
			out = append(out, u)
		}
	}
	return out
}
