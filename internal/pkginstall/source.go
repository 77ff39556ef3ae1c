package pkginstall

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Ecosystem names a package registry family.
type Ecosystem string

// The ecosystems a Source can name.
const (
	NPM  Ecosystem = "npm"
	PyPI Ecosystem = "pypi"
)

// Source is one package a server runs from: what a config's
// `package: npm:@scope/name@1.2.3` names, or what FromCommand recognises
// in `npx -y @scope/name@1.2.3`.
type Source struct {
	Ecosystem Ecosystem
	// Name is the registry's name: "@scope/name" or "name" for npm, the
	// project name for PyPI (as written; PyPI compares it normalized).
	Name string
	// Version is an exact version, a range ("^1.2", ">=1 <2", "~=1.4"
	// for PyPI) or "latest". ParseSource fills in "latest" when none is
	// given.
	Version string
	// Bin names the executable to run when the command named it apart
	// from the package (`npx -p PKG BIN`, `uvx --from PKG BIN`); empty
	// means the package's own (see [Package.Bin]).
	Bin string
}

// String is the source in config syntax: "npm:@scope/name@^1.2".
func (s Source) String() string {
	return string(s.Ecosystem) + ":" + s.Name + "@" + s.Version
}

// npmName is npm's rule for new package names: lower case, URL-safe, an
// optional scope, at most 214 characters (checked apart).
var npmName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`) })

// pypiName is PEP 508's project name.
var pypiName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`) })

// check validates a Source built by hand as ParseSource would.
func (s Source) check() error {
	var err error
	switch s.Ecosystem {
	case NPM:
		_, err = parseNPMSpec(s.Name + "@" + s.Version)
	case PyPI:
		_, err = parsePyPISpec(s.Name + "@" + s.Version)
	default:
		err = fmt.Errorf("unknown ecosystem %q (known: npm, pypi)", s.Ecosystem)
	}
	if err == nil && strings.ContainsAny(s.Bin, `/\`) {
		err = fmt.Errorf("bin %q is not a plain name", s.Bin)
	}
	return err
}

// ParseSource parses a config's package value: "npm:NAME[@VERSION]" or
// "pypi:NAME[@VERSION]" ("pypi:NAME==VERSION" also works). A missing
// version is "latest".
func ParseSource(s string) (Source, error) {
	eco, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Source{}, fmt.Errorf("package %q: want npm:NAME[@VERSION] or pypi:NAME[@VERSION]", s)
	}
	switch Ecosystem(eco) {
	case NPM:
		return parseNPMSpec(rest)
	case PyPI:
		return parsePyPISpec(rest)
	}
	return Source{}, fmt.Errorf("package %q: unknown ecosystem %q (known: npm, pypi)", s, eco)
}

// parseNPMSpec reads "@scope/name@range", "name@range" or "name".
func parseNPMSpec(spec string) (Source, error) {
	name, version := spec, ""
	if i := strings.LastIndex(spec, "@"); i > 0 {
		name, version = spec[:i], spec[i+1:]
		if version == "" {
			return Source{}, fmt.Errorf("npm package %q: empty version after @", spec)
		}
	}
	if err := checkNPMName(name); err != nil {
		return Source{}, err
	}
	if version == "" {
		version = "latest"
	}
	if strings.ContainsAny(version, "/:#") {
		// git URLs, tarball URLs, file: and npm: aliases are not registry
		// versions; installing them would bypass the registry pin.
		return Source{}, fmt.Errorf("npm package %q: version %q is not a registry version or range", spec, version)
	}
	return Source{Ecosystem: NPM, Name: name, Version: version}, nil
}

func checkNPMName(name string) error {
	if len(name) > 214 || !npmName().MatchString(name) {
		return fmt.Errorf("npm package name %q is not valid", name)
	}
	for _, part := range strings.Split(strings.TrimPrefix(name, "@"), "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, ".") {
			return fmt.Errorf("npm package name %q is not valid", name)
		}
	}
	return nil
}

// parsePyPISpec reads "name", "name@1.2", "name@>=1,<2" or "name==1.2".
// Extras ("name[cli]") are refused: they change what gets installed and
// are not supported yet.
func parsePyPISpec(spec string) (Source, error) {
	name, version := spec, ""
	if i := strings.Index(spec, "@"); i >= 0 {
		name, version = spec[:i], spec[i+1:]
	} else if i := strings.IndexAny(spec, "<>=!~"); i >= 0 {
		// A requirement as pip and uv take it: "name==1.2", or a
		// specifier list, "name>=1.0,<2" (spaces allowed).
		name, version = strings.TrimSpace(spec[:i]), strings.ReplaceAll(spec[i:], " ", "")
		if v, ok := strings.CutPrefix(version, "=="); ok && pep440Exact().MatchString(v) {
			version = v
		}
	}
	if strings.Contains(name, "[") {
		return Source{}, fmt.Errorf("pypi package %q: extras are not supported", spec)
	}
	if !pypiName().MatchString(name) {
		return Source{}, fmt.Errorf("pypi package name %q is not valid", name)
	}
	if version == "" {
		version = "latest"
	}
	if version != "latest" && !pep440Exact().MatchString(version) && !pypiSpecifier().MatchString(version) {
		return Source{}, fmt.Errorf("pypi package %q: version %q is not a registry version or specifier", spec, version)
	}
	return Source{Ecosystem: PyPI, Name: name, Version: version}, nil
}

// pypiSpecifier is a PEP 440 version specifier list, e.g. ">=1.0,<2".
var pypiSpecifier = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(~=|==|!=|<=|>=|<|>)[0-9][0-9A-Za-z.*+!]*(,\s*(~=|==|!=|<=|>=|<|>)[0-9][0-9A-Za-z.*+!]*)*$`)
})

// FromCommand recognises a server command that fetches and runs a package
// at start: npx, npm exec, pnpm dlx, yarn dlx, bunx, uvx and pipx run. It
// returns the package, the arguments for its bin, and ok; ok is false for
// any other command. A recognised command that uses a feature a pinned
// install cannot honour (npx -c, several packages, a git or file source)
// is an error, so the caller does not fall back to running it as it is.
func FromCommand(argv []string) (src Source, args []string, ok bool, err error) {
	if len(argv) == 0 {
		return Source{}, nil, false, nil
	}
	tool := strings.TrimSuffix(strings.TrimSuffix(path.Base(strings.ReplaceAll(argv[0], `\`, "/")), ".cmd"), ".exe")
	rest := argv[1:]
	switch tool {
	case "npx", "bunx":
		src, args, err = fromNPX(tool, rest)
	case "npm", "pnpm", "yarn":
		sub := map[string]string{"npm": "exec", "pnpm": "dlx", "yarn": "dlx"}[tool]
		if len(rest) == 0 || rest[0] != sub {
			return Source{}, nil, false, nil
		}
		src, args, err = fromNPX(tool+" "+sub, rest[1:])
	case "uvx":
		src, args, err = fromUVX(rest)
	case "uv":
		if len(rest) < 2 || rest[0] != "tool" || rest[1] != "run" {
			return Source{}, nil, false, nil
		}
		src, args, err = fromUVX(rest[2:])
	case "pipx":
		if len(rest) == 0 || rest[0] != "run" {
			return Source{}, nil, false, nil
		}
		src, args, err = fromPipx(rest[1:])
	default:
		return Source{}, nil, false, nil
	}
	if err != nil {
		return Source{}, nil, true, fmt.Errorf("command %q: %w", strings.Join(argv, " "), err)
	}
	return src, args, true, nil
}

// npxFlags are the flags of npx, npm exec, pnpm dlx and yarn dlx that
// change nothing about which package runs. Those taking a value list it.
var npxFlags = map[string]bool{
	"-y": false, "--yes": false, "--no": false, "-q": false, "--quiet": false,
	"--silent": false, "-s": false, "--prefer-online": false, "--prefer-offline": false,
	"--no-install": false, "--bun": false, "--loglevel": true,
	"--allow-build": true, "--cache": true,
}

// Flags that name another registry or index are refused, not skipped:
// installed from the default one instead, an unscoped private name would
// resolve to whatever the public registry has under it (dependency
// confusion).
var (
	npmRegistryFlags  = []string{"--registry"}
	pypiRegistryFlags = []string{"--index-url", "-i", "--default-index", "--index", "--extra-index-url", "--find-links", "-f"}
)

// registryFlagError is the refusal of a flag that names a registry.
func registryFlagError(tool, flag, where string) error {
	return fmt.Errorf("%s %s is not honoured: mcpbox installs from the registry that %s; set yours there and drop the flag (docs/config.md, package and args)", tool, flag, where)
}

const (
	npmRegistryConfig  = "npm's config names (NPM_CONFIG_REGISTRY, ~/.npmrc or the project's .npmrc)"
	pypiRegistryConfig = "pip's config names (PIP_INDEX_URL or UV_DEFAULT_INDEX)"
)

func fromNPX(tool string, rest []string) (Source, []string, error) {
	var pkgs []string
	for len(rest) > 0 {
		a := rest[0]
		if a == "--" {
			rest = rest[1:]
			break
		}
		if !strings.HasPrefix(a, "-") {
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		switch {
		case name == "-p" || name == "--package":
			if !hasVal {
				if len(rest) < 2 {
					return Source{}, nil, fmt.Errorf("%s %s needs a package", tool, name)
				}
				val, rest = rest[1], rest[1:]
			}
			pkgs = append(pkgs, val)
		case name == "-c" || name == "--call":
			return Source{}, nil, fmt.Errorf("%s %s runs a shell command; name the package and its bin instead", tool, name)
		case slices.Contains(npmRegistryFlags, name):
			return Source{}, nil, registryFlagError(tool, name, npmRegistryConfig)
		default:
			takes, known := npxFlags[name]
			if !known {
				return Source{}, nil, fmt.Errorf("%s flag %q is not understood", tool, a)
			}
			if takes && !hasVal {
				rest = rest[1:]
			}
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return Source{}, nil, fmt.Errorf("%s without a package", tool)
	}
	var src Source
	var err error
	switch len(pkgs) {
	case 0:
		src, err = parseNPMSpec(rest[0])
	case 1:
		// npx -p PKG BIN ARGS: the first word is the bin, not a package.
		src, err = parseNPMSpec(pkgs[0])
		src.Bin = rest[0]
	default:
		return Source{}, nil, fmt.Errorf("%s with %d packages: only one package per server is supported", tool, len(pkgs))
	}
	if err != nil {
		return Source{}, nil, err
	}
	return src, append([]string(nil), rest[1:]...), nil
}

// uvxFlags: flags of uvx (uv tool run) that leave the package alone.
var uvxFlags = map[string]bool{
	"-q": false, "--quiet": false, "-v": false, "--verbose": false, "--isolated": false,
	"--no-cache": false, "--refresh": false, "--offline": false, "-n": false,
	"--python": true, "-p": true, "--cache-dir": true, "--python-preference": true,
}

func fromUVX(rest []string) (Source, []string, error) {
	from := ""
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		a := rest[0]
		if a == "--" {
			rest = rest[1:]
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		switch {
		case name == "--from":
			if !hasVal {
				if len(rest) < 2 {
					return Source{}, nil, fmt.Errorf("uvx --from needs a package")
				}
				val, rest = rest[1], rest[1:]
			}
			from = val
		case name == "--with" || name == "-w" || name == "--with-requirements" || name == "--with-editable":
			return Source{}, nil, fmt.Errorf("uvx %s adds packages; only one package per server is supported", name)
		case slices.Contains(pypiRegistryFlags, name):
			return Source{}, nil, registryFlagError("uvx", name, pypiRegistryConfig)
		default:
			takes, known := uvxFlags[name]
			if !known {
				return Source{}, nil, fmt.Errorf("uvx flag %q is not understood", a)
			}
			if takes && !hasVal {
				rest = rest[1:]
			}
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return Source{}, nil, fmt.Errorf("uvx without a package")
	}
	if from != "" {
		src, err := parsePyPISpec(from)
		src.Bin = rest[0]
		return src, append([]string(nil), rest[1:]...), err
	}
	src, err := parsePyPISpec(rest[0])
	return src, append([]string(nil), rest[1:]...), err
}

func fromPipx(rest []string) (Source, []string, error) {
	spec := ""
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		a := rest[0]
		if a == "--" {
			rest = rest[1:]
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		switch name {
		case "--spec":
			if !hasVal {
				if len(rest) < 2 {
					return Source{}, nil, fmt.Errorf("pipx run --spec needs a package")
				}
				val, rest = rest[1], rest[1:]
			}
			spec = val
		case "--no-cache", "-q", "--quiet", "-v", "--verbose":
		case "--index-url", "-i":
			return Source{}, nil, registryFlagError("pipx run", name, pypiRegistryConfig)
		case "--pip-args":
			return Source{}, nil, fmt.Errorf("pipx run --pip-args passes flags to pip (an index among them) that a pinned install does not take; drop it")
		case "--python":
			if !hasVal {
				rest = rest[1:]
			}
		default:
			return Source{}, nil, fmt.Errorf("pipx run flag %q is not understood", a)
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return Source{}, nil, fmt.Errorf("pipx run without a package")
	}
	if spec != "" {
		src, err := parsePyPISpec(spec)
		src.Bin = rest[0]
		return src, append([]string(nil), rest[1:]...), err
	}
	src, err := parsePyPISpec(rest[0])
	return src, append([]string(nil), rest[1:]...), err
}
