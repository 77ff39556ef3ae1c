package egress

import (
	"strings"
)

// packageOf names the package (and version, when the path carries one)
// that a plain-HTTP request to a package registry fetches. Under CONNECT
// (TLS) only the host is visible and nothing is extracted.
func packageOf(host, path string) (name, version string) {
	switch host {
	case "registry.npmjs.org", "registry.yarnpkg.com":
		return npmPackage(path)
	case "pypi.org":
		return pypiPackage(path)
	case "files.pythonhosted.org":
		return pythonFile(path)
	case "proxy.golang.org":
		return goModule(path)
	case "crates.io", "static.crates.io":
		return crate(path)
	}
	return "", ""
}

// npmPackage: /NAME, /NAME/VERSION, /NAME/-/NAME-VERSION.tgz, with NAME
// possibly @scope/name (also escaped as @scope%2fname).
func npmPackage(path string) (string, string) {
	parts := splitPath(strings.ReplaceAll(strings.ReplaceAll(path, "%2f", "/"), "%2F", "/"))
	if len(parts) == 0 || strings.HasPrefix(parts[0], "-") {
		return "", "" // /-/v1/search and other API endpoints
	}
	name, rest := parts[0], parts[1:]
	if strings.HasPrefix(name, "@") {
		if len(rest) == 0 {
			return "", ""
		}
		name, rest = name+"/"+rest[0], rest[1:]
	}
	switch {
	case len(rest) == 0:
		return name, ""
	case len(rest) == 1:
		return name, rest[0]
	case len(rest) == 2 && rest[0] == "-":
		base := name[strings.LastIndex(name, "/")+1:]
		file, ok := strings.CutSuffix(rest[1], ".tgz")
		if v, found := strings.CutPrefix(file, base+"-"); ok && found {
			return name, v
		}
	}
	return name, ""
}

// pypiPackage: /simple/NAME/, /pypi/NAME/json, /pypi/NAME/VERSION/json.
func pypiPackage(path string) (string, string) {
	parts := splitPath(path)
	switch {
	case len(parts) == 2 && parts[0] == "simple":
		return parts[1], ""
	case len(parts) == 3 && parts[0] == "pypi" && parts[2] == "json":
		return parts[1], ""
	case len(parts) == 4 && parts[0] == "pypi" && parts[3] == "json":
		return parts[1], parts[2]
	}
	return "", ""
}

// pythonFile: /packages/.../FILE, a wheel NAME-VERSION(-TAGS).whl or an
// sdist NAME-VERSION.tar.gz / .zip.
func pythonFile(path string) (string, string) {
	parts := splitPath(path)
	if len(parts) < 2 || parts[0] != "packages" {
		return "", ""
	}
	file := parts[len(parts)-1]
	if stem, ok := strings.CutSuffix(file, ".whl"); ok {
		f := strings.Split(stem, "-")
		if len(f) >= 5 {
			return f[0], f[1]
		}
		return "", ""
	}
	for _, ext := range []string{".tar.gz", ".zip", ".tar.bz2", ".tgz"} {
		if stem, ok := strings.CutSuffix(file, ext); ok {
			i := strings.LastIndex(stem, "-")
			if i > 0 && i+1 < len(stem) && stem[i+1] >= '0' && stem[i+1] <= '9' {
				return stem[:i], stem[i+1:]
			}
		}
	}
	return "", ""
}

// goModule: /MODULE/@v/VERSION.{info,mod,zip}, /MODULE/@v/list,
// /MODULE/@latest, with upper case escaped as "!x".
func goModule(path string) (string, string) {
	path = strings.TrimPrefix(path, "/")
	if mod, ok := strings.CutSuffix(path, "/@latest"); ok {
		return unescapeGo(mod), ""
	}
	mod, file, ok := strings.Cut(path, "/@v/")
	if !ok || mod == "" {
		return "", ""
	}
	if file == "list" {
		return unescapeGo(mod), ""
	}
	for _, ext := range []string{".info", ".mod", ".zip"} {
		if v, ok := strings.CutSuffix(file, ext); ok {
			return unescapeGo(mod), unescapeGo(v)
		}
	}
	return "", ""
}

func unescapeGo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '!' && i+1 < len(s) {
			i++
			b.WriteString(strings.ToUpper(s[i : i+1]))
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// crate: crates.io /api/v1/crates/NAME/VERSION/download, static.crates.io
// /crates/NAME/NAME-VERSION.crate.
func crate(path string) (string, string) {
	parts := splitPath(path)
	switch {
	case len(parts) == 6 && parts[0] == "api" && parts[2] == "crates" && parts[5] == "download":
		return parts[3], parts[4]
	case len(parts) == 3 && parts[0] == "crates":
		if stem, ok := strings.CutSuffix(parts[2], ".crate"); ok {
			if v, ok := strings.CutPrefix(stem, parts[1]+"-"); ok {
				return parts[1], v
			}
		}
	}
	return "", ""
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
