package pkginstall

import (
	"strconv"
	"strings"
)

// A small PEP 440 subset: release numbers, a/b/rc pre-releases, .post
// and .dev, which is what pep440Exact accepts. Epochs and local versions
// are not supported (pep440Exact refuses them).

type pep440 struct {
	release []int
	pre     int // 0 none; else 1 a, 2 b, 3 rc
	preN    int
	post    int // -1 none
	dev     int // -1 none
}

func parsePEP440(v string) pep440 {
	p := pep440{post: -1, dev: -1}
	if i := strings.Index(v, ".dev"); i >= 0 {
		p.dev, _ = strconv.Atoi(v[i+4:])
		v = v[:i]
	}
	if i := strings.Index(v, ".post"); i >= 0 {
		p.post, _ = strconv.Atoi(v[i+5:])
		v = v[:i]
	}
	for k, tag := range []string{"a", "b", "rc"} {
		if i := strings.Index(v, tag); i >= 0 {
			p.pre = k + 1
			p.preN, _ = strconv.Atoi(v[i+len(tag):])
			v = v[:i]
			break
		}
	}
	for _, s := range strings.Split(v, ".") {
		n, _ := strconv.Atoi(s)
		p.release = append(p.release, n)
	}
	return p
}

func isPrerelease(v string) bool {
	p := parsePEP440(v)
	return p.pre != 0 || p.dev >= 0
}

// pep440Compare orders two versions: -1, 0 or 1.
func pep440Compare(a, b string) int {
	x, y := parsePEP440(a), parsePEP440(b)
	for i := 0; i < max(len(x.release), len(y.release)); i++ {
		var m, n int
		if i < len(x.release) {
			m = x.release[i]
		}
		if i < len(y.release) {
			n = y.release[i]
		}
		if c := cmpInt(m, n); c != 0 {
			return c
		}
	}
	// 1.0.dev1 < 1.0a1 < 1.0 < 1.0.post1
	rank := func(p pep440) (int, int) {
		switch {
		case p.pre != 0:
			return p.pre, p.preN
		case p.dev >= 0 && p.post < 0:
			return -1, 0
		}
		return 4, 0
	}
	xr, xn := rank(x)
	yr, yn := rank(y)
	if c := cmpInt(xr, yr); c != 0 {
		return c
	}
	if c := cmpInt(xn, yn); c != 0 {
		return c
	}
	if c := cmpInt(x.post, y.post); c != 0 {
		return c
	}
	// a .dev release comes before the same version without it
	dx, dy := x.dev, y.dev
	if dx < 0 {
		dx = 1 << 30
	}
	if dy < 0 {
		dy = 1 << 30
	}
	return cmpInt(dx, dy)
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// matchSpecifiers reports whether v satisfies a comma-separated PEP 440
// specifier list (~=, ==, !=, <=, >=, <, >; "==1.*" prefix matches).
func matchSpecifiers(v, spec string) bool {
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		op := ""
		for _, o := range []string{"~=", "==", "!=", "<=", ">=", "<", ">"} {
			if strings.HasPrefix(s, o) {
				op = o
				break
			}
		}
		want := strings.TrimSpace(s[len(op):])
		if op == "" || want == "" {
			return false
		}
		if prefix, ok := strings.CutSuffix(want, ".*"); ok && (op == "==" || op == "!=") {
			in := v == prefix || strings.HasPrefix(v, prefix+".")
			if in != (op == "==") {
				return false
			}
			continue
		}
		c := pep440Compare(v, want)
		ok := false
		switch op {
		case "==":
			ok = c == 0
		case "!=":
			ok = c != 0
		case "<=":
			ok = c <= 0
		case ">=":
			ok = c >= 0
		case "<":
			ok = c < 0
		case ">":
			ok = c > 0
		case "~=":
			// ~=1.4.2 means >=1.4.2, ==1.4.*
			r := parsePEP440(want).release
			if len(r) < 2 {
				return false
			}
			prefix := joinInts(r[:len(r)-1])
			ok = c >= 0 && (v == prefix || strings.HasPrefix(v, prefix+"."))
		}
		if !ok {
			return false
		}
	}
	return true
}

// joinInts spells release numbers as a version: 1.4.
func joinInts(r []int) string {
	s := make([]string, len(r))
	for i, n := range r {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ".")
}
