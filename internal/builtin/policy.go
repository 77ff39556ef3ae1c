package builtin

import (
	"fmt"
	"path"
	"strings"
)

// CommandPolicy decides which commands run. Each pattern is a path.Match
// glob, tried against the command line (argv joined by single spaces) and
// against the program's base name. Deny wins, then Approve, then Allow; a
// command no Allow pattern matches is refused, so an empty Allow refuses
// everything. Against the command line, "*" and "?" also match "/", so
// "git push*" refuses "git push origin feature/x"; against the base name
// they are path.Match's. Options before a subcommand change the line
// ("git -C dir push"): deny "git *push*" to cover them.
//
// A malformed Deny or Approve pattern matches every command (fail closed);
// a malformed Allow pattern matches none.
type CommandPolicy struct {
	Allow, Deny, Approve []string
}

// verdict is the outcome of a policy check.
type verdict int

const (
	refused     verdict = iota // no allow rule, or a deny rule
	needsReview                // an approve rule: refused in this build
	allowed
)

// check returns the verdict for argv and the rule that decided it ("" if
// no rule matched).
func (p CommandPolicy) check(argv []string) (verdict, string) {
	line := strings.Join(argv, " ")
	base := path.Base(argv[0])
	if rule, ok := firstMatch(p.Deny, line, base, true); ok {
		return refused, rule
	}
	if rule, ok := firstMatch(p.Approve, line, base, true); ok {
		return needsReview, rule
	}
	// An allow rule by name means the system's program of that name: a
	// file of the same name in the workspace is not it.
	allowBase := base
	if strings.Contains(argv[0], "/") && !systemProgram(argv[0]) {
		allowBase = "\x00"
	}
	if rule, ok := firstMatch(p.Allow, line, allowBase, false); ok {
		return allowed, rule
	}
	return refused, ""
}

func firstMatch(patterns []string, line, base string, badMatches bool) (string, bool) {
	for _, pat := range patterns {
		m1, err1 := lineMatch(pat, line)
		m2, err2 := path.Match(pat, base)
		if err1 != nil || err2 != nil {
			if badMatches {
				return pat, true
			}
			continue
		}
		if m1 || m2 {
			return pat, true
		}
	}
	return "", false
}

// systemProgram reports whether path is in a system directory (which the
// sandbox mounts read-only from the host), not in the workspace.
func systemProgram(p string) bool {
	p = path.Clean(p)
	for _, dir := range []string{"/usr/", "/bin/", "/sbin/"} {
		if strings.HasPrefix(p, dir) {
			return true
		}
	}
	return false
}

// lineMatch is path.Match over a command line, except that "*" and "?"
// also match "/": "git push*" must refuse "git push origin feature/x".
func lineMatch(pat, line string) (bool, error) {
	const slash = "\x00"
	return path.Match(strings.ReplaceAll(pat, "/", slash), strings.ReplaceAll(line, "/", slash))
}

// policyError explains a refusal to the agent, naming the deciding rule.
func (p CommandPolicy) policyError(argv []string) error {
	v, rule := p.check(argv)
	line := strings.Join(argv, " ")
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	switch {
	case v == allowed:
		return nil
	case v == needsReview:
		return fmt.Errorf("command %q matches approve rule %q: it needs human approval, which is not available in this build: refused", line, rule)
	case rule != "":
		return fmt.Errorf("command %q refused: matches deny rule %q", line, rule)
	case len(p.Allow) == 0:
		return fmt.Errorf("command %q refused: no commands are allowed in this workspace", line)
	}
	return fmt.Errorf("command %q refused: no allow rule matches (allowed: %s)", line, summarize(p.Allow))
}

// summarize lists patterns for a message, bounded in length.
func summarize(patterns []string) string {
	var b strings.Builder
	for i, pat := range patterns {
		if b.Len() > 300 {
			fmt.Fprintf(&b, ", and %d more", len(patterns)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", pat)
	}
	return b.String()
}
