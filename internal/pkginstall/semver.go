package pkginstall

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Semantic versions and npm-style ranges, as github.com/Masterminds/semver/v3
// reads them (StrictNewVersion, NewConstraint, Check), which mcpbox used
// before: that package compiles six regular expressions at package
// initialisation, ~0.3 ms of every mcpbox process, the CLI's exec
// included (issue 19). FuzzRange checks this against it.
//
// A range is groups joined by "||"; a group is comparators separated by
// spaces or commas, all of which must hold, or a hyphen range "A - B"
// (>= A, <= B). A comparator is an operator (none, =, !=, >, <, >=, <=,
// ~, ~>, ^) and a partial version: 1, 1.2, 1.2.3, with x, X or * for any
// part, an optional leading v, and a prerelease after a full version.
// A prerelease version matches only a group with a comparator that names
// a prerelease of the same MAJOR.MINOR.PATCH: npm's rule (Masterminds lets
// any prerelease comparator admit every prerelease, so ">=0.0.70-alpha"
// picked 1.52.0-alpha where npm installs 0.0.83).

// semVersion is a strict SemVer 2.0.0 version (the build metadata is
// ignored: it does not order).
type semVersion struct {
	major, minor, patch uint64
	pre                 string
}

const (
	maxVersionLen  = 256
	maxRangeLen    = 512
	maxRangeGroups = 32
)

// parseVersion parses a strict MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD].
func parseVersion(s string) (semVersion, bool) {
	if s == "" || len(s) > maxVersionLen {
		return semVersion{}, false
	}
	parts := strings.SplitN(s, ".", 3)
	if len(parts) != 3 {
		return semVersion{}, false
	}
	var v semVersion
	rest, build, hasBuild := strings.Cut(parts[2], "+")
	if hasBuild && !identifiers(build, false) {
		return semVersion{}, false
	}
	patch, pre, hasPre := strings.Cut(rest, "-")
	if hasPre && !identifiers(pre, true) {
		return semVersion{}, false
	}
	v.pre = pre
	var ok [3]bool
	v.major, ok[0] = number(parts[0])
	v.minor, ok[1] = number(parts[1])
	v.patch, ok[2] = number(patch)
	return v, ok[0] && ok[1] && ok[2]
}

// number parses a version number: digits, no leading zero.
func number(s string) (uint64, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.IndexFunc(s, notDigit) >= 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func notDigit(r rune) bool { return r < '0' || r > '9' }

// identifiers checks dot-separated identifiers of [0-9A-Za-z-], none
// empty; in a prerelease a numeric one has no leading zero.
func identifiers(s string, pre bool) bool {
	for id := range strings.SplitSeq(s, ".") {
		if id == "" || strings.IndexFunc(id, func(r rune) bool {
			return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-')
		}) >= 0 {
			return false
		}
		if pre && len(id) > 1 && id[0] == '0' && strings.IndexFunc(id, notDigit) < 0 {
			return false
		}
	}
	return true
}

// tuple is v without its prerelease.
func (v semVersion) tuple() [3]uint64 { return [3]uint64{v.major, v.minor, v.patch} }

// compare orders v and o by SemVer precedence.
func (v semVersion) compare(o semVersion) int {
	for _, d := range [][2]uint64{{v.major, o.major}, {v.minor, o.minor}, {v.patch, o.patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case v.pre == o.pre:
		return 0
	case v.pre == "":
		return 1
	case o.pre == "":
		return -1
	}
	return comparePrerelease(v.pre, o.pre)
}

// comparePrerelease orders dot-separated prerelease identifiers: numbers
// numerically and below words, words lexically, a shorter list first.
func comparePrerelease(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		switch {
		case i >= len(as):
			return -1
		case i >= len(bs):
			return 1
		case as[i] == bs[i]:
			continue
		}
		an, aErr := strconv.ParseUint(as[i], 10, 64)
		bn, bErr := strconv.ParseUint(bs[i], 10, 64)
		switch {
		case aErr != nil && bErr != nil:
			return strings.Compare(as[i], bs[i])
		case aErr != nil:
			return 1
		case bErr != nil:
			return -1
		case an > bn:
			return 1
		default:
			return -1
		}
	}
	return 0
}

// comparator is one operator and (partial) version of a range.
type comparator struct {
	op  string
	ver semVersion // the missing or x parts as 0
	// dirty: a part is missing or x; minorDirty: from the minor on;
	// patchDirty: the patch only.
	dirty, minorDirty, patchDirty bool
}

// semRange is a parsed range: groups (or) of comparators (and).
type semRange struct {
	groups [][]comparator
	pre    [][][3]uint64 // group i's comparators' MAJOR.MINOR.PATCH that name a prerelease
}

// errRange is the error of a range that does not parse.
var errRange = errors.New("not a version range")

// parseRange parses a range as the package comment says.
func parseRange(s string) (*semRange, error) {
	if len(s) > maxRangeLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", errRange, maxRangeLen)
	}
	ors := strings.Split(s, "||")
	if len(ors) > maxRangeGroups {
		return nil, fmt.Errorf("%w: more than %d alternatives", errRange, maxRangeGroups)
	}
	r := &semRange{}
	for _, or := range ors {
		group, err := parseGroup(or)
		if err != nil {
			return nil, err
		}
		var pre [][3]uint64
		for _, c := range group {
			if c.ver.pre != "" {
				pre = append(pre, c.ver.tuple())
			}
		}
		r.groups = append(r.groups, group)
		r.pre = append(r.pre, pre)
	}
	return r, nil
}

var rangeOps = []string{">=", "<=", "!=", "~>", ">", "<", "=", "~", "^"} // longest first

// parseGroup parses comparators separated by spaces or commas, or a
// hyphen range.
func parseGroup(s string) ([]comparator, error) {
	if tokens := strings.FieldsFunc(s, isSpace); len(tokens) == 3 && tokens[1] == "-" && !strings.Contains(s, ",") {
		lo, err := parseComparator(">=", tokens[0])
		if err != nil {
			return nil, err
		}
		hi, err := parseComparator("<=", tokens[2])
		if err != nil {
			return nil, err
		}
		return []comparator{lo, hi}, nil
	}
	var group []comparator
	for part := range strings.SplitSeq(s, ",") {
		tokens := strings.FieldsFunc(part, isSpace)
		if len(tokens) == 0 {
			return nil, fmt.Errorf("%w: an empty comparator in %q", errRange, s)
		}
		for i := 0; i < len(tokens); i++ {
			op, ver := "", tokens[i]
			for _, o := range rangeOps {
				if strings.HasPrefix(ver, o) {
					op, ver = o, ver[len(o):]
					break
				}
			}
			if ver == "" && op != "" && i+1 < len(tokens) { // ">= 1.2"
				i++
				ver = tokens[i]
			}
			c, err := parseComparator(op, ver)
			if err != nil {
				return nil, err
			}
			group = append(group, c)
		}
	}
	return group, nil
}

// parseComparator parses a partial version after op.
func parseComparator(op, s string) (comparator, error) {
	c := comparator{op: op}
	bad := fmt.Errorf("%w: %q", errRange, op+s)
	s = strings.TrimPrefix(s, "v")
	if len(s) > maxVersionLen {
		return c, bad
	}
	core, build, hasBuild := strings.Cut(s, "+")
	if hasBuild && !identifiers(build, false) {
		return c, bad
	}
	parts := strings.SplitN(core, ".", 3)
	if len(parts) == 3 {
		var hasPre bool
		parts[2], c.ver.pre, hasPre = strings.Cut(parts[2], "-")
		if hasPre && !identifiers(c.ver.pre, true) {
			return c, bad
		}
	}
	nums := []*uint64{&c.ver.major, &c.ver.minor, &c.ver.patch}
	for i := range 3 {
		if i >= len(parts) || isX(parts[i]) {
			c.dirty = true
			c.minorDirty = i <= 1
			c.patchDirty = i == 2
			if i == 0 {
				c.minorDirty = false // as Masterminds: "*" is dirty only
			}
			// Every later part must be x too (or missing).
			for _, p := range parts[i:] {
				if !isX(p) {
					return c, bad
				}
			}
			if c.ver.pre != "" && i < 2 {
				return c, bad
			}
			return c, nil
		}
		n, ok := number(parts[i])
		if !ok {
			return c, bad
		}
		*nums[i] = n
	}
	return c, nil
}

// isSpace is what Masterminds' regular expressions call space (\s).
func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r' }

func isX(s string) bool { return s == "x" || s == "X" || s == "*" }

// check reports whether v satisfies r.
func (r *semRange) check(v semVersion) bool {
	for i, group := range r.groups {
		if v.pre != "" && !slices.Contains(r.pre[i], v.tuple()) {
			continue
		}
		ok := true
		for _, c := range group {
			if !c.check(v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (c comparator) check(v semVersion) bool {
	con := c.ver
	switch c.op {
	case "", "=":
		if c.dirty {
			return c.tilde(v)
		}
		return v.compare(con) == 0
	case "!=":
		if c.dirty {
			switch {
			case con.major != v.major:
				return true
			case c.minorDirty:
				return false
			case con.minor != v.minor:
				return true
			case c.patchDirty:
				return (v.pre != "" || con.pre != "") && comparePrerelease(v.pre, con.pre) != 0
			}
		}
		return v.compare(con) != 0
	case ">":
		if !c.dirty {
			return v.compare(con) > 0
		}
		switch {
		case v.major != con.major:
			return v.major > con.major
		case c.minorDirty:
			return false
		case c.patchDirty:
			return v.minor > con.minor
		}
		return v.compare(con) > 0
	case "<":
		return v.compare(con) < 0
	case ">=":
		return v.compare(con) >= 0
	case "<=":
		if !c.dirty {
			return v.compare(con) <= 0
		}
		return v.major < con.major || v.major == con.major && (c.minorDirty || v.minor <= con.minor)
	case "~", "~>":
		return c.tilde(v)
	case "^":
		switch {
		case v.compare(con) < 0:
			return false
		case con.major > 0 || c.minorDirty:
			return v.major == con.major
		case v.major > 0:
			return false
		case con.minor > 0 || c.patchDirty:
			return v.minor == con.minor
		case v.minor > 0:
			return false
		}
		return v.patch == con.patch
	}
	return false
}

// tilde is ~: at least the version, within its minor (or its major if
// the minor is x or missing).
func (c comparator) tilde(v semVersion) bool {
	con := c.ver
	switch {
	case v.compare(con) < 0:
		return false
	case con.major == 0 && con.minor == 0 && con.patch == 0 && !c.minorDirty && !c.patchDirty:
		return true
	case v.major != con.major:
		return false
	}
	return v.minor == con.minor || c.minorDirty
}
