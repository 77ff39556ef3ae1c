package pkginstall

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"mcpbox/internal/sandbox"
)

// DefaultPyPIIndex is PyPI's simple index.
const DefaultPyPIIndex = "https://pypi.org/simple/"

// PyPIConfig is the user's Python package index configuration. The zero
// value is PyPI without credentials.
type PyPIConfig struct {
	// IndexURL is a PEP 503 simple index, possibly with user:password;
	// empty means DefaultPyPIIndex. The credentials go to the index host
	// only: the installer's requests, and pip in the fetching sandbox
	// through a secret config file.
	IndexURL string
	// FileHosts are extra hosts the index's files live on, which the
	// fetching sandbox may reach. PyPI's files.pythonhosted.org is added
	// for the default index.
	FileHosts []string
}

// String names the index without its credentials.
func (c PyPIConfig) String() string {
	u, err := c.index()
	if err != nil {
		return "(invalid index URL)"
	}
	return redactURL(u)
}

// GoString does the same for %#v.
func (c PyPIConfig) GoString() string { return "PyPIConfig(" + c.String() + ")" }

// LoadPyPIConfig reads the index pip or uv would use: PIP_INDEX_URL, else
// UV_DEFAULT_INDEX or UV_INDEX_URL.
func LoadPyPIConfig(getenv func(string) string) (PyPIConfig, error) {
	var c PyPIConfig
	for _, k := range []string{"PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL"} {
		if v := getenv(k); v != "" {
			c.IndexURL = v
			break
		}
	}
	_, err := c.index()
	return c, err
}

func (c PyPIConfig) index() (*url.URL, error) {
	raw := c.IndexURL
	if raw == "" {
		raw = DefaultPyPIIndex
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("python package index %q: want an http(s) URL", redactRaw(raw))
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

func redactRaw(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return redactURL(u)
	}
	return "(unparseable)"
}

// normalizePyPI is PEP 503's name normalization.
func normalizePyPI(name string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(name, "-"))
}

// wheelFile is one file an index lists.
type wheelFile struct {
	name    string   // file name
	url     *url.URL // absolute, without fragment
	sha256  []byte   // from the #sha256= fragment
	yanked  bool
	version string
	pure    bool // a py3-none-any style wheel
}

var anchorRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?is)<a\s([^>]*)>([^<]*)</a>`) })
var hrefRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?is)\bhref\s*=\s*"([^"]*)"`) })

// pypiFiles reads the index page of a project: its wheels, with their
// versions and hashes.
func (in *Installer) pypiFiles(ctx context.Context, name string) ([]wheelFile, *url.URL, error) {
	idx, err := in.PyPI.index()
	if err != nil {
		return nil, nil, err
	}
	page := idx.JoinPath(normalizePyPI(name) + "/")
	reg := in.registry()
	body, err := reg.getBasic(ctx, page, idx, "text/html", maxMetadata)
	if errors.Is(err, ErrNotFound) {
		return nil, idx, fmt.Errorf("pypi package %s: %w at %s", name, ErrNotFound, redactURL(idx))
	}
	if err != nil {
		return nil, idx, fmt.Errorf("fetching the index page of pypi package %s: %w", name, err)
	}
	trusted := []*url.URL{idx}
	for _, h := range in.PyPI.FileHosts {
		trusted = append(trusted, &url.URL{Scheme: "https", Host: h})
	}
	var files []wheelFile
	for _, m := range anchorRE().FindAllSubmatch(body, -1) {
		href := hrefRE().FindSubmatch(m[1])
		if href == nil {
			continue
		}
		fname := strings.TrimSpace(html.UnescapeString(string(m[2])))
		u, err := page.Parse(html.UnescapeString(string(href[1])))
		if err != nil || !strings.HasSuffix(fname, ".whl") || strings.ContainsAny(fname, `/\`) {
			continue // sdists are never installed: building one runs its code
		}
		if checkArtifactURL(u, trusted) != nil {
			continue // an address the index is not on (checkArtifactURL)
		}
		f := wheelFile{name: fname, url: u, yanked: bytes.Contains(bytes.ToLower(m[1]), []byte("data-yanked"))}
		if h, ok := strings.CutPrefix(u.Fragment, "sha256="); ok {
			f.sha256, _ = hex.DecodeString(h)
		}
		u.Fragment = ""
		parts := strings.Split(strings.TrimSuffix(fname, ".whl"), "-")
		if len(parts) < 5 || normalizePyPI(parts[0]) != normalizePyPI(name) {
			continue
		}
		f.version = parts[1]
		abi, plat := parts[len(parts)-2], parts[len(parts)-1]
		f.pure = abi == "none" && plat == "any" && slices.ContainsFunc(strings.Split(parts[len(parts)-3], "."), func(t string) bool { return t == "py3" || t == "py2.py3" })
		files = append(files, f)
	}
	return files, idx, nil
}

// pickWheel chooses the pure-Python wheel of the version spec names.
func pickWheel(name, spec string, files []wheelFile) (wheelFile, error) {
	var best *wheelFile
	for i, f := range files {
		if !f.pure || !pep440Exact().MatchString(f.version) {
			continue
		}
		ok := false
		switch {
		case spec == "latest":
			ok = !f.yanked && !isPrerelease(f.version)
		case pep440Exact().MatchString(spec):
			ok = pep440Compare(f.version, spec) == 0
		default:
			ok = !f.yanked && !isPrerelease(f.version) && matchSpecifiers(f.version, spec)
		}
		if ok && (best == nil || pep440Compare(f.version, best.version) > 0) {
			best = &files[i]
		}
	}
	if best == nil {
		return wheelFile{}, fmt.Errorf("pypi package %s: no pure-Python wheel matches %q (platform wheels and sdists are not supported yet)", name, spec)
	}
	if len(best.sha256) != 32 {
		return wheelFile{}, fmt.Errorf("pypi package %s: the index lists %s without a sha256 hash", name, best.name)
	}
	return *best, nil
}

func (in *Installer) installPyPI(ctx context.Context, src Source, pin *Pin) (*Package, error) {
	in.progress("resolving %s", src)
	files, idx, err := in.pypiFiles(ctx, src.Name)
	if err != nil {
		return nil, err
	}
	spec := src.Version
	if pin != nil {
		spec = pin.Version
	}
	wf, err := pickWheel(src.Name, spec, files)
	if err != nil {
		return nil, err
	}
	integrity := "sha256-" + base64.StdEncoding.EncodeToString(wf.sha256)
	if pin != nil && !sameDigest(integrity, pin.Integrity) {
		return nil, fmt.Errorf("installing %s: %w (index lists %s, pinned %s)", pin, ErrPinMismatch, integrity, pin.Integrity)
	}
	got := Pin{Ecosystem: PyPI, Name: src.Name, Version: wf.version, Integrity: integrity}
	dst, err := entryDir(in.Store, got)
	if err != nil {
		return nil, err
	}
	pkg, unlock, err := in.claimEntry(ctx, dst, Source{Ecosystem: PyPI, Name: src.Name, Version: wf.version, Bin: src.Bin}, pin)
	if pkg != nil || err != nil {
		return pkg, err
	}
	defer unlock()
	in.progress("downloading %s", got)
	whl, err := in.registry().getBasic(ctx, wf.url, idx, "", maxTarball)
	if err != nil {
		return nil, fmt.Errorf("downloading pypi package %s: %w", got, err)
	}
	if err := checkIntegrity(whl, integrity); err != nil {
		return nil, fmt.Errorf("pypi package %s: %w", got, err)
	}
	scripts, err := wheelScripts(whl)
	if err != nil {
		return nil, fmt.Errorf("pypi package %s: %w", got, err)
	}
	bins := map[string]string{}
	for _, s := range scripts {
		bins[s] = path.Join("site", "bin", s)
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
	defer os.RemoveAll(stage)
	tree, cache, wheels := filepath.Join(stage, "tree"), filepath.Join(stage, "cache"), filepath.Join(stage, "wheel")
	for _, d := range []string{tree, cache, wheels} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, fmt.Errorf("creating staging dir: %w", err)
		}
	}
	if err := writeNew(filepath.Join(wheels, wf.name), whl); err != nil {
		return nil, fmt.Errorf("writing staging wheel: %w", err)
	}
	if err := in.pipInstall(ctx, got, tree, cache, wheels, wf, idx); err != nil {
		return nil, err
	}
	lock, err := pipLock(tree, got)
	if err != nil {
		return nil, fmt.Errorf("pypi package %s: %w", got, err)
	}
	got.Lockfile = sri(lock)
	if pin != nil && pin.Lockfile != "" && pin.Lockfile != got.Lockfile {
		return nil, fmt.Errorf("installing %s: %w: its dependencies now resolve to a lockfile hashing to %s, pinned %s", pin, ErrPinMismatch, got.Lockfile, pin.Lockfile)
	}
	if err := writeNew(filepath.Join(tree, "requirements.lock"), lock); err != nil {
		return nil, fmt.Errorf("writing the lockfile: %w", err)
	}
	if err := sanitizeTree(tree); err != nil {
		return nil, fmt.Errorf("pypi package %s: %w", got, err)
	}
	if err := checkBins(tree, bins); err != nil {
		return nil, fmt.Errorf("pypi package %s: %w", got, err)
	}
	in.progress("installed %s", got)
	m, err := commit(tree, dst, &manifest{Pin: got, Bins: bins})
	if err != nil {
		return nil, err
	}
	return &Package{Pin: m.Pin, Dir: dst, Bins: m.Bins, Bin: bin}, nil
}

// pipInstall runs the host's pip in a sandbox whose only egress is the
// index (and its file hosts): the verified wheel and its dependencies,
// wheels only, so no package code runs while installing.
func (in *Installer) pipInstall(ctx context.Context, pin Pin, tree, cache, wheels string, wf wheelFile, idx *url.URL) error {
	in.progress("installing %s and its dependencies (network: index only)", pin)
	hosts := []*url.URL{idx, wf.url}
	fileHosts := in.PyPI.FileHosts
	if in.PyPI.IndexURL == "" {
		fileHosts = append(fileHosts, "files.pythonhosted.org")
	}
	for _, h := range fileHosts {
		hosts = append(hosts, &url.URL{Scheme: "https", Host: h})
	}
	rules, err := registryRules(hosts)
	if err != nil {
		return err
	}
	conf := fmt.Sprintf("[global]\nindex-url = %s\n", idx.String())
	spec := sandbox.Spec{
		Args: []string{"python3", "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
			"--only-binary=:all:", "--target", sbxTree + "/site", "--report", sbxTree + "/pip-report.json",
			"--cache-dir", sbxCache, "/wheel/" + wf.name},
		Output: tree,
		Mounts: []sandbox.Mount{
			{Source: cache, Target: sbxCache, Writable: true},
			{Source: wheels, Target: "/wheel"},
		},
		Dir:           sbxTree,
		Env:           []string{"PIP_CONFIG_FILE=/run/secrets/pip_conf", "PYTHONNOUSERSITE=1"},
		Secrets:       []sandbox.Secret{{Name: "pip_conf", Value: []byte(conf), AsFile: true}},
		Limits:        in.limits(),
		AllowDegraded: in.AllowDegraded,
	}
	spec.Network.Rules, spec.Network.Log = rules, in.EgressLog
	var out tailBuffer
	res, err := sandbox.Run(ctx, spec, sandbox.Stdio{Stdin: bytes.NewReader(nil), Stdout: &out, Stderr: &out})
	if err != nil {
		return fmt.Errorf("installing pypi package %s: starting the install sandbox: %w", pin, err)
	}
	if res.TimedOut {
		return fmt.Errorf("installing pypi package %s: timed out after %s", pin, spec.Limits.Timeout)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("installing pypi package %s: pip exited with %d: %s", pin, res.ExitCode, redactCreds(out.summary(), idx))
	}
	return nil
}

// redactCreds removes an index URL's password from pip's output.
func redactCreds(s string, idx *url.URL) string {
	if p, ok := idx.User.Password(); ok && p != "" {
		s = strings.ReplaceAll(s, p, "***")
	}
	return s
}

// pipReport is the part of pip's installation report checked here.
type pipReport struct {
	Install []struct {
		Metadata struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"metadata"`
		DownloadInfo struct {
			ArchiveInfo struct {
				Hash   string            `json:"hash"`
				Hashes map[string]string `json:"hashes"`
			} `json:"archive_info"`
		} `json:"download_info"`
	} `json:"install"`
}

// pipLock turns pip's report into a lockfile in pip's --require-hashes
// form, after checking the top-level wheel is the verified one and every
// dependency has a sha256. The report itself (host paths, timings) is
// dropped.
func pipLock(tree string, pin Pin) ([]byte, error) {
	report := filepath.Join(tree, "pip-report.json")
	data, err := os.ReadFile(report)
	if err != nil {
		return nil, fmt.Errorf("reading pip's report: %w", err)
	}
	os.Remove(report)
	var r pipReport
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("reading pip's report: %w", err)
	}
	_, want, _ := parseDigest(pin.Integrity)
	var lines []string
	found := false
	for _, e := range r.Install {
		h := e.DownloadInfo.ArchiveInfo.Hashes["sha256"]
		if h == "" {
			h, _ = strings.CutPrefix(e.DownloadInfo.ArchiveInfo.Hash, "sha256=")
		}
		d, err := hex.DecodeString(h)
		if err != nil || len(d) != 32 {
			return nil, fmt.Errorf("pip installed %s %s without a sha256", e.Metadata.Name, e.Metadata.Version)
		}
		if normalizePyPI(e.Metadata.Name) == normalizePyPI(pin.Name) {
			if e.Metadata.Version != pin.Version || !bytes.Equal(d, want) {
				return nil, fmt.Errorf("pip installed %s %s with sha256 %s, not the verified wheel", e.Metadata.Name, e.Metadata.Version, h)
			}
			found = true
		}
		lines = append(lines, fmt.Sprintf("%s==%s --hash=sha256:%s", normalizePyPI(e.Metadata.Name), e.Metadata.Version, h))
	}
	if !found {
		return nil, fmt.Errorf("pip's report does not list %s", pin.Name)
	}
	slices.Sort(lines)
	return []byte(strings.Join(lines, "\n") + "\n"), nil
}

// wheelScripts lists a wheel's console scripts (entry_points.txt).
func wheelScripts(whl []byte) ([]string, error) {
	zr, err := zip.NewReader(bytes.NewReader(whl), int64(len(whl)))
	if err != nil {
		return nil, fmt.Errorf("reading wheel: %w", err)
	}
	var names []string
	for _, f := range zr.File {
		dir, file := path.Split(f.Name)
		if file != "entry_points.txt" || !strings.HasSuffix(strings.TrimSuffix(dir, "/"), ".dist-info") || strings.Count(dir, "/") != 1 {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(rc, maxPackageJSON))
		rc.Close()
		if err != nil {
			return nil, err
		}
		section := ""
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			l := strings.TrimSpace(sc.Text())
			switch {
			case strings.HasPrefix(l, "["):
				section = strings.Trim(l, "[] ")
			case section == "console_scripts" && strings.Contains(l, "="):
				k, _, _ := strings.Cut(l, "=")
				k = strings.TrimSpace(k)
				if k == "" || strings.ContainsAny(k, `/\`) || k == "." || k == ".." {
					return nil, fmt.Errorf("wheel: console script %q is not a plain name", k)
				}
				names = append(names, k)
			}
		}
	}
	return names, nil
}
