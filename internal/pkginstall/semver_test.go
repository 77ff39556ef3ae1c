package pkginstall

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

// The reference for semver.go is github.com/Masterminds/semver/v3, which
// mcpbox used before (now only here, in a test), but for prerelease
// versions, where semver.go follows npm (see agree).

// agree fails t unless parseRange and parseVersion say what Masterminds
// says of spec and ver: a range we accept is one it accepts, and it
// holds for the same versions (a prerelease version may be refused where
// Masterminds admits it, by npm's rule); a version we accept is one it
// accepts.
func agree(t *testing.T, spec, ver string) {
	t.Helper()
	v, vok := parseVersion(ver)
	mv, merr := semver.StrictNewVersion(ver)
	if vok != (merr == nil) {
		t.Fatalf("version %q: ours ok %v, Masterminds %v", ver, vok, merr)
	}
	r, err := parseRange(spec)
	if err != nil {
		return // stricter than Masterminds is allowed
	}
	mc, merr := semver.NewConstraint(spec)
	if merr != nil {
		t.Fatalf("range %q: ours parses, Masterminds: %v", spec, merr)
	}
	if !vok || r.check(v) == mc.Check(mv) {
		return
	}
	// The one difference allowed: npm's prerelease rule, stricter than
	// Masterminds' (a prerelease version needs a prerelease comparator of
	// its own MAJOR.MINOR.PATCH in the group); without it the version is
	// refused where Masterminds admits it.
	if v.pre != "" && !r.check(v) {
		for _, g := range r.pre {
			if slices.Contains(g, v.tuple()) {
				t.Fatalf("range %q, version %q: ours false, Masterminds true, with a comparator of the version's own tuple", spec, ver)
			}
		}
		return
	}
	t.Fatalf("range %q, version %q: ours %v, Masterminds %v", spec, ver, r.check(v), mc.Check(mv))
}

// genPartial makes a partial version of the range grammar (after an x
// part only x parts; a prerelease only after two numbers).
func genPartial(rnd *rand.Rand) string {
	x := false
	part := func() string {
		if x || rnd.IntN(6) == 0 {
			x = true
			return []string{"x", "X", "*"}[rnd.IntN(3)]
		}
		return []string{"0", "1", "2", "3", "10"}[rnd.IntN(5)]
	}
	s := part()
	if rnd.IntN(4) > 0 {
		s += "." + part()
		numbers := !x
		if rnd.IntN(3) > 0 {
			s += "." + part()
			if numbers && rnd.IntN(4) == 0 {
				s += "-" + genPre(rnd)
			}
		}
	}
	if rnd.IntN(10) == 0 {
		s = "v" + s
	}
	return s
}

func genPre(rnd *rand.Rand) string {
	ids := []string{"alpha", "beta", "rc", "0", "1", "2", "11", "a-b"}
	n := 1 + rnd.IntN(2)
	out := make([]string, n)
	for i := range out {
		out[i] = ids[rnd.IntN(len(ids))]
	}
	return strings.Join(out, ".")
}

func genVersion(rnd *rand.Rand) string {
	nums := []string{"0", "1", "2", "3", "10"}
	s := nums[rnd.IntN(5)] + "." + nums[rnd.IntN(5)] + "." + nums[rnd.IntN(5)]
	if rnd.IntN(3) == 0 {
		s += "-" + genPre(rnd)
	}
	if rnd.IntN(8) == 0 {
		s += "+build.5"
	}
	return s
}

func genRange(rnd *rand.Rand) string {
	ops := []string{"", "=", "!=", ">", "<", ">=", "<=", "~", "~>", "^"}
	var groups []string
	for range 1 + rnd.IntN(2) {
		if rnd.IntN(6) == 0 {
			groups = append(groups, genPartial(rnd)+" - "+genPartial(rnd))
			continue
		}
		var cs []string
		for range 1 + rnd.IntN(2) {
			sp := ""
			if rnd.IntN(5) == 0 {
				sp = " "
			}
			cs = append(cs, ops[rnd.IntN(len(ops))]+sp+genPartial(rnd))
		}
		sep := " "
		if rnd.IntN(3) == 0 {
			sep = ", "
		}
		groups = append(groups, strings.Join(cs, sep))
	}
	return strings.Join(groups, " || ")
}

// TestRangesAgreeWithMasterminds: random ranges of the grammar (every
// operator, x parts, hyphens, prereleases) against random versions.
func TestRangesAgreeWithMasterminds(t *testing.T) {
	rnd := rand.New(rand.NewPCG(19, 1))
	parsed := 0
	for range 20000 {
		spec, ver := genRange(rnd), genVersion(rnd)
		if _, err := parseRange(spec); err == nil {
			parsed++
		}
		agree(t, spec, ver)
	}
	if parsed != 20000 {
		t.Errorf("only %d of 20000 generated ranges parsed: the grammar is narrower than documented", parsed)
	}
	// Versions order as Masterminds orders them.
	for range 5000 {
		a, b := genVersion(rnd), genVersion(rnd)
		va, _ := parseVersion(a)
		vb, _ := parseVersion(b)
		ma, mb := semver.MustParse(a), semver.MustParse(b)
		if va.compare(vb) != ma.Compare(mb) {
			t.Fatalf("compare(%q, %q): ours %d, Masterminds %d", a, b, va.compare(vb), ma.Compare(mb))
		}
	}
}

// TestRangeExamples: the forms the docs and the npm registry use, and
// what is refused.
func TestRangeExamples(t *testing.T) {
	for _, tc := range []struct {
		spec, ver string
		want      bool
	}{
		{"^1.2.3", "1.9.0", true}, {"^1.2.3", "2.0.0", false}, {"^0.2.3", "0.3.0", false},
		{"~1.2", "1.2.9", true}, {"~1.2", "1.3.0", false}, {"1.x", "1.99.0", true},
		{">=0.9 <1.1", "1.0.0", true}, {">=0.9, <1.1", "1.1.0", false}, {"*", "3.0.0", true},
		{"^1.2.3", "1.3.0-beta", false}, {"^1.3.0-beta", "1.3.0-beta.2", true},
		{"1.2 - 2.3", "2.3.7", true}, {"1.2 - 2.3", "2.4.0", false}, {"^0.1 || ^0.9", "0.9.1", true},
		// npm's prerelease rule (npm view @playwright/mcp@'>=0.0.70-alpha'
		// version: 0.0.83, not 1.52.0-alpha-2025-03-26): a prerelease
		// matches only beside a prerelease comparator of its own tuple.
		{">=0.0.70-alpha", "1.52.0-alpha-2025-03-26", false}, {">=0.0.70-alpha", "0.0.83", true},
		{">=0.0.70-alpha", "0.0.70-alpha-2026-04-01", true}, {"^1.2.3-beta.1", "1.3.0-beta", false},
		{"~1.2.3-beta.1", "1.2.4-alpha", false}, {">1.2.3-alpha <1.2.4", "1.2.4-alpha", false},
		{"1.2.3-beta.1 - 2", "1.2.3-rc.1", true}, {"<1.2.3-rc.1", "0.0.70-alpha", false},
	} {
		r, err := parseRange(tc.spec)
		v, ok := parseVersion(tc.ver)
		if err != nil || !ok || r.check(v) != tc.want {
			t.Errorf("%q on %q: %v (%v, %v), want %v", tc.spec, tc.ver, r != nil && r.check(v), err, ok, tc.want)
		}
		agree(t, tc.spec, tc.ver)
	}
	for _, bad := range []string{"", " ", "1.0 ||", "latest", "1.2.3.4", "01.2", "=>1", "1 - 2 - 3", "^1.2.3-", strings.Repeat("1 ", 300)} {
		if _, err := parseRange(bad); err == nil {
			t.Errorf("parseRange(%q) parsed", bad)
		}
	}
	for _, bad := range []string{"1.2", "v1.2.3", "1.2.3-01", "1.2.3-a..b", "1.2.3+", "01.2.3", "1.2.3/..", "1.2.-3"} {
		if _, ok := parseVersion(bad); ok {
			t.Errorf("parseVersion(%q) parsed", bad)
		}
		agree(t, "*", bad)
	}
}

// FuzzRange: any range we parse, Masterminds parses and agrees on.
func FuzzRange(f *testing.F) {
	for _, s := range []string{"^1.2.3", "~1.2 || >=3", "1.2 - 2.3", "!=1.x", ">1.2.x-rc.1", "<=v2"} {
		f.Add(s, "1.2.4")
	}
	f.Fuzz(func(t *testing.T, spec, ver string) {
		agree(t, spec, ver)
	})
}
