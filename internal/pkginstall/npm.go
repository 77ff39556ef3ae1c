package pkginstall

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"mcpbox/internal/egress"
	"mcpbox/internal/sandbox"
)

// Where the install sandboxes see the tree being built and npm's cache.
const (
	sbxTree  = "/workspace/output"
	sbxCache = "/npm-cache"
)

// wrapperName names the package.json the installer writes around the
// installed package, so npm has a project to install into.
const wrapperName = "mcpbox-package-install"

func (in *Installer) installNPM(ctx context.Context, src Source, pin *Pin, lock []byte) (*Package, error) {
	reg := in.registry()
	v, got, regURL, err := in.resolveNPM(ctx, reg, src, pin)
	if err != nil {
		return nil, err
	}
	dst, err := entryDir(in.Store, got)
	if err != nil {
		return nil, err
	}
	pkg, unlock, err := in.claimEntry(ctx, dst, Source{Ecosystem: NPM, Name: src.Name, Version: v.Version, Bin: src.Bin}, pin)
	if pkg != nil || err != nil {
		return pkg, err
	}
	defer unlock()
	in.progress("downloading %s", got)
	tgz, err := reg.tarball(ctx, src.Name, v, v.Dist.Integrity)
	if err != nil {
		return nil, err
	}
	bins, err := tarballBins(tgz, src.Name)
	if err != nil {
		return nil, fmt.Errorf("npm package %s: %w", got, err)
	}
	bin, err := chooseBin(src, bins)
	if err != nil {
		return nil, err
	}
	in.checked()
	stage, err := stagingDir(in.Store)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage) // after a commit only the cache is left
	tree, err := in.buildNPM(ctx, stage, &got, pin, lock, regURL, v)
	if err != nil {
		return nil, err
	}
	if err := checkBins(tree, bins); err != nil {
		return nil, fmt.Errorf("npm package %s: %w", got, err)
	}
	in.progress("installed %s", got)
	m, err := commit(tree, dst, &manifest{Pin: got, Bins: bins})
	if err != nil {
		return nil, err
	}
	return &Package{Pin: m.Pin, Dir: dst, Bins: m.Bins, Bin: bin}, nil
}

// resolveNPM picks the version src (or the pin) names from the registry's
// metadata and checks its integrity is a sha512, and the pin's.
func (in *Installer) resolveNPM(ctx context.Context, reg *registry, src Source, pin *Pin) (npmVersion, Pin, *url.URL, error) {
	in.progress("resolving %s", src)
	p, regURL, err := reg.packument(ctx, src.Name)
	if err != nil {
		return npmVersion{}, Pin{}, nil, err
	}
	spec := src.Version
	if pin != nil {
		spec = pin.Version
	}
	v, err := p.resolve(spec)
	if err != nil {
		return npmVersion{}, Pin{}, nil, err
	}
	if !exactVersion(v.Version) {
		return npmVersion{}, Pin{}, nil, fmt.Errorf("npm package %s: registry lists version %q, not an exact version", src.Name, v.Version)
	}
	if _, err := parseSRI(v.Dist.Integrity); err != nil {
		return npmVersion{}, Pin{}, nil, fmt.Errorf("npm package %s@%s: registry metadata: %w", src.Name, v.Version, err)
	}
	if pin != nil && !sameDigest(v.Dist.Integrity, pin.Integrity) {
		return npmVersion{}, Pin{}, nil, fmt.Errorf("installing %s: %w (registry metadata %s, pinned %s)", pin, ErrPinMismatch, v.Dist.Integrity, pin.Integrity)
	}
	return v, Pin{Ecosystem: NPM, Name: src.Name, Version: v.Version, Integrity: v.Dist.Integrity}, regURL, nil
}

// buildNPM installs got with its dependencies into stage/tree, through
// the fetching and the scripts sandboxes, checks the result and sets
// got.Lockfile. With lock, npm ci installs exactly that lockfile.
func (in *Installer) buildNPM(ctx context.Context, stage string, got, pin *Pin, lock []byte, regURL *url.URL, v npmVersion) (string, error) {
	tree, cache := filepath.Join(stage, "tree"), filepath.Join(stage, "cache")
	for _, d := range []string{tree, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("creating staging dir: %w", err)
		}
	}
	wrapper, _ := json.MarshalIndent(map[string]any{
		"name": wrapperName, "version": "0.0.0", "private": true,
		"dependencies": map[string]string{got.Name: got.Version},
	}, "", "  ")
	if err := writeNew(filepath.Join(tree, "package.json"), wrapper); err != nil {
		return "", fmt.Errorf("writing staging package.json: %w", err)
	}
	if lock != nil {
		if err := writeNew(filepath.Join(tree, "package-lock.json"), lock); err != nil {
			return "", fmt.Errorf("writing the pinned lockfile: %w", err)
		}
	}
	if err := in.npmFetch(ctx, *got, tree, cache, regURL, v, lock != nil); err != nil {
		return "", err
	}
	lockHash, err := checkLockfile(tree, *got)
	if err != nil {
		return "", fmt.Errorf("npm package %s: %w", got, err)
	}
	got.Lockfile = lockHash
	if pin != nil && pin.Lockfile != "" && pin.Lockfile != got.Lockfile {
		return "", fmt.Errorf("installing %s: %w: its dependencies now resolve to a lockfile hashing to %s, pinned %s", pin, ErrPinMismatch, got.Lockfile, pin.Lockfile)
	}
	if err := in.npmScripts(ctx, *got, tree, cache); err != nil {
		return "", err
	}
	// Scripts can write anywhere in the tree: the lockfile must still be
	// the one checked, a regular file.
	if err := checkLockfileHash(tree, *got); err != nil {
		return "", fmt.Errorf("npm package %s: install scripts changed the lockfile: %w", got, err)
	}
	if err := sanitizeTree(tree); err != nil {
		return "", fmt.Errorf("npm package %s: %w", got, err)
	}
	return tree, nil
}

// npmFetch runs `npm install --ignore-scripts` in a sandbox whose only
// egress is the package's registries, with the user's credentials for
// them in a secret file. No package code runs in it: scripts are off.
func (in *Installer) npmFetch(ctx context.Context, pin Pin, tree, cache string, reg *url.URL, v npmVersion, ci bool) error {
	in.progress("installing %s and its dependencies (network: registry only)", pin)
	regs := in.fetchRegistries(reg, v.Dist.Tarball)
	rules, err := registryRules(regs)
	if err != nil {
		return err
	}
	// npm ci installs exactly a pinned lockfile, and refuses one that
	// does not match the wrapper package.json.
	verb := "install"
	if ci {
		verb = "ci"
	}
	spec := in.npmSpec(tree, cache, verb, "--ignore-scripts", "--no-audit", "--no-fund",
		"--omit=dev", "--no-update-notifier", "--package-lock=true", "--prefix", sbxTree)
	spec.Network.Rules, spec.Network.Log = rules, in.EgressLog
	spec.Secrets = []sandbox.Secret{{Name: "npmrc", Value: in.NPM.npmrc(regs), AsFile: true}}
	spec.Env = append(spec.Env, "npm_config_userconfig=/run/secrets/npmrc")
	return in.runNPM(ctx, pin, "fetching", spec)
}

// fetchRegistries are what an npm fetch from reg may reach (its egress
// rules, the registries its npmrc has credentials for): the registries
// (reg, the scopes') and the package's tarball. One whose host is an
// address is left out unless the user's configuration names that
// registry (checkArtifactURL): the project's .npmrc is not trusted with
// an address rule (registries); a name is left to the egress proxy,
// which refuses one resolving to a non-public address.
func (in *Installer) fetchRegistries(reg *url.URL, tarball string) []*url.URL {
	trusted := in.NPM.registries()
	regs := []*url.URL{}
	if checkArtifactURL(reg, trusted) == nil {
		regs = append(regs, reg)
	}
	for _, s := range in.NPM.Scopes {
		if u, err := registryURL(s); err == nil && checkArtifactURL(u, trusted) == nil {
			regs = append(regs, u)
		}
	}
	if u, err := url.Parse(tarball); err == nil && checkArtifactURL(u, trusted) == nil {
		regs = append(regs, u)
	}
	return regs
}

// npmScripts runs the packages' install scripts (`npm rebuild`) in a
// sandbox with no network and no credentials: package code sees only
// the tree being built.
func (in *Installer) npmScripts(ctx context.Context, pin Pin, tree, cache string) error {
	in.progress("running install scripts of %s (no network)", pin)
	spec := in.npmSpec(tree, cache, "rebuild", "--ignore-scripts=false", "--no-update-notifier",
		"--offline", "--prefix", sbxTree)
	// Scripts commonly run what they just built or unpacked (node-gyp,
	// prebuilt binaries): the sandbox, not noexec, contains them here.
	spec.ExecWritable = true
	spec.Env = append(spec.Env, "npm_config_userconfig=/nonexistent/.npmrc")
	if dir := nodeHeaders("node"); dir != "" {
		// An add-on with no prebuilt binary at hand (fetching one needs
		// the network) is built from source: against the host node's
		// own headers, which node-gyp would download.
		spec.Env = append(spec.Env, "npm_config_nodedir="+dir)
	}
	return in.runNPM(ctx, pin, "running install scripts of", spec)
}

// nodeHeaders is the install prefix of node (a command name or path)
// when it has the headers node-gyp builds add-ons against
// (PREFIX/include/node/common.gypi, as Node's own and the distributions'
// packages install them) and the sandbox shows it (under /usr); ""
// otherwise.
func nodeHeaders(node string) string {
	p, err := exec.LookPath(node)
	if err != nil {
		return ""
	}
	if p, err = filepath.EvalSymlinks(p); err != nil {
		return ""
	}
	prefix := filepath.Dir(filepath.Dir(p))
	if prefix != "/usr" && !strings.HasPrefix(prefix, "/usr/") {
		return ""
	}
	if fi, err := os.Stat(filepath.Join(prefix, "include", "node", "common.gypi")); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return prefix
}

func (in *Installer) npmSpec(tree, cache string, args ...string) sandbox.Spec {
	npm := in.NPMCommand
	if npm == "" {
		npm = "npm"
	}
	env := []string{
		"npm_config_cache=" + sbxCache, "npm_config_globalconfig=/dev/null",
		"npm_config_fund=false", "npm_config_audit=false", "npm_config_loglevel=warn",
		"npm_config_update_notifier=false",
	}
	if b := hostBundle(); b != "" {
		// Node trusts its own CA list, not the system's: a host whose
		// registry is reached through a TLS proxy trusts that proxy's CA
		// in the system bundle (npm there reads it through a global
		// npmrc's cafile, which npm_config_globalconfig leaves out).
		env = append(env, "NODE_EXTRA_CA_CERTS="+b)
	}
	return sandbox.Spec{
		Args:          append([]string{npm}, args...),
		Output:        tree,
		Mounts:        []sandbox.Mount{{Source: cache, Target: sbxCache, Writable: true}},
		Dir:           sbxTree,
		Env:           env,
		Limits:        in.limits(),
		AllowDegraded: in.AllowDegraded,
	}
}

// bundlePaths are the system CA bundles a sandbox shows at the same path
// (its /etc binds /etc/ssl/certs and /etc/pki's certificates): Debian's,
// then Fedora's and RHEL's.
var bundlePaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
}

// hostBundle returns the first of bundlePaths on this host, or "".
func hostBundle() string {
	for _, p := range bundlePaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// runNPM runs one install sandbox and turns a failure into an error that
// quotes the end of npm's output.
func (in *Installer) runNPM(ctx context.Context, pin Pin, what string, spec sandbox.Spec) error {
	var out tailBuffer
	res, err := sandbox.Run(ctx, spec, sandbox.Stdio{Stdin: bytes.NewReader(nil), Stdout: &out, Stderr: &out})
	if err != nil {
		return fmt.Errorf("%s npm package %s: starting the install sandbox: %w", what, pin, err)
	}
	if res.TimedOut {
		return fmt.Errorf("%s npm package %s: timed out after %s", what, pin, spec.Limits.Timeout)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s npm package %s: npm exited with %d: %s", what, pin, res.ExitCode, out.summary())
	}
	return nil
}

// registryRules allows each registry's host and port, and nothing else.
func registryRules(regs []*url.URL) ([]egress.Rule, error) {
	var rules []egress.Rule
	for _, u := range regs {
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		n, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("registry %s: bad port %q", redactURL(u), port)
		}
		r := egress.Rule{Host: host, Ports: []int{n}}
		if ip := net.ParseIP(host); ip != nil {
			r.Host = ip.String() // egress wants the canonical spelling
		}
		if !slices.ContainsFunc(rules, func(o egress.Rule) bool { return o.Host == r.Host && o.Ports[0] == n }) {
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// lockfile is the part of package-lock.json (v2/v3) checked here.
type lockfile struct {
	Packages map[string]struct {
		Version   string `json:"version"`
		Integrity string `json:"integrity"`
		Link      bool   `json:"link"`
		InBundle  bool   `json:"inBundle"`
	} `json:"packages"`
}

// checkLockfile checks that npm installed exactly the pinned archive of
// the top-level package and recorded a sha512 for every dependency, and
// returns the lockfile's hash.
func checkLockfile(tree string, pin Pin) (string, error) {
	data, err := os.ReadFile(filepath.Join(tree, "package-lock.json"))
	if err != nil {
		return "", fmt.Errorf("reading the generated lockfile: %w", err)
	}
	var lf lockfile
	if err := json.Unmarshal(data, &lf); err != nil {
		return "", fmt.Errorf("reading the generated lockfile: %w", err)
	}
	top, ok := lf.Packages["node_modules/"+pin.Name]
	if !ok {
		return "", fmt.Errorf("the generated lockfile does not list %s", pin.Name)
	}
	if top.Version != pin.Version || !sameDigest(top.Integrity, pin.Integrity) {
		return "", fmt.Errorf("npm installed %s@%s with integrity %s, not the verified %s: %w",
			pin.Name, top.Version, top.Integrity, pin.Integrity, &IntegrityError{Want: pin.Integrity, Got: top.Integrity})
	}
	for k, p := range lf.Packages {
		if k == "" || p.Link || p.InBundle {
			continue
		}
		if _, err := parseSRI(p.Integrity); err != nil {
			return "", fmt.Errorf("the generated lockfile pins %s without a sha512 integrity", k)
		}
	}
	return sri(data), nil
}

// checkLockfileHash checks a tree's lockfile against its pin; the
// lockfile must be a regular file, not a link a script planted.
func checkLockfileHash(dir string, pin Pin) error {
	if pin.Lockfile == "" {
		return nil
	}
	name := filepath.Join(dir, "package-lock.json")
	if pin.Ecosystem == PyPI {
		name = filepath.Join(dir, "requirements.lock")
	}
	if fi, err := os.Lstat(name); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("lockfile %s is not a regular file", name)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	if got := sri(data); got != pin.Lockfile {
		return fmt.Errorf("lockfile: %w", &IntegrityError{Want: pin.Lockfile, Got: got})
	}
	return nil
}

// npmBins reads a package.json's bin field: a string (one bin named like
// the package without its scope) or a map. Each path is made relative to
// the entry (node_modules/NAME/PATH) and must stay inside the package.
func npmBins(pkgJSON []byte, name string) (map[string]string, error) {
	var pj struct {
		Bin json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(pkgJSON, &pj); err != nil {
		return nil, fmt.Errorf("reading package.json: %w", err)
	}
	raw := map[string]string{}
	var one string
	switch {
	case len(pj.Bin) == 0 || string(pj.Bin) == "null":
	case json.Unmarshal(pj.Bin, &one) == nil:
		raw[path.Base(name)] = one
	case json.Unmarshal(pj.Bin, &raw) == nil:
	default:
		return nil, fmt.Errorf("package.json: bin is neither a string nor a map")
	}
	bins := map[string]string{}
	for k, p := range raw {
		clean := path.Clean("/" + strings.ReplaceAll(p, `\`, "/"))[1:]
		if k == "" || strings.ContainsAny(k, "/\\") || clean == "" || clean != strings.TrimPrefix(path.Clean(p), "./") {
			return nil, fmt.Errorf("package.json: bin %q: %q leaves the package", k, p)
		}
		bins[k] = path.Join("node_modules", name, clean)
	}
	return bins, nil
}

// checkBins checks that every bin is a regular file inside the tree once
// symlinks are resolved, as a server sandbox will see it.
func checkBins(tree string, bins map[string]string) error {
	root, err := filepath.EvalSymlinks(tree)
	if err != nil {
		return err
	}
	for k, rel := range bins {
		p, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return fmt.Errorf("bin %s: %w", k, err)
		}
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			return fmt.Errorf("bin %s: %s leads out of the installed tree", k, rel)
		}
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("bin %s: %s is not a regular file", k, rel)
		}
	}
	return nil
}

// chooseBin picks the bin to run: the one the source named, else the one
// named like the package (without scope), else the only one.
func chooseBin(src Source, bins map[string]string) (string, error) {
	names := make([]string, 0, len(bins))
	for k := range bins {
		names = append(names, k)
	}
	slices.Sort(names)
	if src.Bin != "" {
		if _, ok := bins[src.Bin]; ok {
			return src.Bin, nil
		}
		return "", fmt.Errorf("%s package %s has no bin %q (bins: %s)", src.Ecosystem, src.Name, src.Bin, strings.Join(names, ", "))
	}
	if _, ok := bins[path.Base(src.Name)]; ok {
		return path.Base(src.Name), nil
	}
	switch len(names) {
	case 0:
		return "", fmt.Errorf("%s package %s %w", src.Ecosystem, src.Name, errNoBin)
	case 1:
		return names[0], nil
	}
	return "", fmt.Errorf("%s package %s has %d bins (%s); name one, as npx does: command: [npx, -y, -p, %q, %s]",
		src.Ecosystem, src.Name, len(names), strings.Join(names, ", "), src.Name+"@"+src.Version, names[0])
}

// tailBuffer keeps the last few KiB written to it, for error messages.
// npm's stdout and stderr both write to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte // guarded by mu
}

const tailMax = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = t.b[len(t.b)-tailMax:]
	}
	return len(p), nil
}

// summary is npm's telling error lines (else its last lines) on one
// line: the thrown Error first, without stack frames and log pointers.
func (t *tailBuffer) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var all, first, rest []string
	for _, l := range strings.Split(string(t.b), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "npm error"))
		if l == "" || strings.HasPrefix(l, "at ") || strings.HasPrefix(l, "^") ||
			strings.Contains(l, "complete log") || strings.HasPrefix(l, "Node.js v") {
			continue
		}
		all = append(all, l)
		if strings.Contains(l, "Error") || strings.HasPrefix(l, "code ") || strings.Contains(l, "ERR") {
			first = append(first, l)
		} else if strings.HasPrefix(l, "command ") || strings.HasPrefix(l, "path ") || strings.Contains(l, "notarget") {
			rest = append(rest, l)
		}
	}
	keep := append(first, rest...)
	if len(keep) == 0 {
		keep = all[max(0, len(all)-3):]
	}
	if len(keep) == 0 {
		return "(no output)"
	}
	msg := strings.Join(keep[:min(len(keep), 4)], " | ")
	if len(msg) > 600 {
		msg = msg[:600] + "..."
	}
	return msg
}

// LockfileNPMRC is an npmrc with the user's credentials for the
// registries lock's packages resolve to, and nothing else (one
// host-level entry each), for an install elsewhere (a pod's); values are
// the credentials in it, for redaction. No credential applies: nil.
func (c NPMConfig) LockfileNPMRC(lock []byte) (rc []byte, values []string, err error) {
	regs, err := lockfileURLs(lock)
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	seen := map[string]bool{}
	for _, u := range regs {
		cr, ok := c.CredentialFor(u)
		nerf := "//" + u.Host + "/"
		if !ok || seen[nerf] {
			continue
		}
		seen[nerf] = true
		if cr.Token != "" {
			fmt.Fprintf(&b, "%s:_authToken=%s\n", nerf, cr.Token)
			values = append(values, cr.Token)
		} else if cr.Basic != "" {
			fmt.Fprintf(&b, "%s:_auth=%s\n", nerf, cr.Basic)
			values = append(values, cr.Basic)
		}
	}
	if b.Len() == 0 {
		return nil, nil, nil
	}
	return b.Bytes(), values, nil
}

// LockfileRegistryRules are the egress rules of the hosts an `npm ci` of
// lock (a package-lock.json) downloads from: each package's resolved
// URL's host and port. A package without one (a link, a bundled
// dependency) needs none.
//
// The lockfile's URLs came from registries, which are not trusted: one
// whose host is an address other than a registry of npm's configuration
// c (checkArtifactURL) is refused.
func (c NPMConfig) LockfileRegistryRules(lock []byte) ([]egress.Rule, error) {
	regs, err := lockfileURLs(lock)
	if err != nil {
		return nil, err
	}
	trusted := c.registries()
	for _, u := range regs {
		if err := checkArtifactURL(u, trusted); err != nil {
			return nil, fmt.Errorf("the lockfile: %w", err)
		}
	}
	return registryRules(regs)
}

// lockfileURLs are the resolved URLs of lock's packages, by host.
func lockfileURLs(lock []byte) ([]*url.URL, error) {
	var lf struct {
		Packages map[string]struct {
			Resolved string `json:"resolved"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(lock, &lf); err != nil {
		return nil, fmt.Errorf("reading the lockfile: %w", err)
	}
	var regs []*url.URL
	for name, p := range lf.Packages {
		if p.Resolved == "" {
			continue
		}
		u, err := url.Parse(p.Resolved)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("the lockfile's package %q resolves to %q, not a registry URL", name, p.Resolved)
		}
		regs = append(regs, u)
	}
	// The proxy's config is compared as text: one order.
	slices.SortFunc(regs, func(a, b *url.URL) int { return strings.Compare(a.Host, b.Host) })
	return regs, nil
}
