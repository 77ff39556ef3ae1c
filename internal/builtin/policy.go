package builtin

import (
	"fmt"
	"path"
	"strings"
)

// CommandPolicy decides which commands run. Each pattern is a path.Match
// glob, tried against the command line (argv joined by single spaces) and
// against the program alone, with the program spelled each way it can be
// named: as given, by its base name, by its absolute path, and by the path
// of the file it resolves to (symlinks followed) and that file's base name.
// Deny and Approve match if any spelling matches, and so does Allow: both
// see the same command, so "/usr/bin/git push" and "/bin/../bin/git push"
// meet deny "git *push*" as "git push" does.
//
// Deny wins, then Approve, then Allow; a command no Allow pattern matches is
// refused, so an empty Allow refuses everything. Against the command line,
// "*" and "?" also match "/", so "git push*" refuses "git push origin
// feature/x"; against the program alone they are path.Match's. Options
// before a subcommand change the line ("git -C dir push"): deny "git
// *push*" to cover them.
//
// A program named without a slash is looked up in the sandbox's
// executable directories (its PATH, which the sandbox mounts read-only from
// the host), and the file found there is what runs. A program given by a
// path (absolute, or relative to the working directory, such as "./build.sh")
// runs only if it resolves into those directories, or if an Allow pattern
// names it by path: its program word contains a "/" ("./build.sh *",
// "/opt/tool/bin/tool"). A workspace file is therefore never the system
// program of the same name, and Allow "*" does not allow workspace
// programs.
//
// Wrappers: for a program that runs another command from its arguments
// (env, nice, timeout, xargs, sudo, a shell, ...; see wrappers), Deny and
// Approve are also tried against every tail of argv, so "env -i git push"
// and "sh -c 'git push'" meet deny "git *push*". This is best effort: allowing a shell, an interpreter, make,
// find or any program that can start others allows what it starts, and Deny
// only sees the argv the client sent.
//
// A malformed Deny or Approve pattern matches every command (fail closed);
// a malformed Allow pattern matches none.
type CommandPolicy struct {
	Allow, Deny, Approve []string

	// dirs are the executable directories; nil: execDirs. Tests set it.
	dirs []string
}

// execDirs is the sandbox's PATH (sandbox.sandboxPATH).
var execDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// wrappers run a command given in their arguments.
var wrappers = map[string]bool{
	"env": true, "nice": true, "nohup": true, "timeout": true, "stdbuf": true, "setsid": true,
	"ionice": true, "chrt": true, "taskset": true, "time": true, "xargs": true, "sudo": true,
	"doas": true, "su": true, "runuser": true, "setpriv": true, "unshare": true, "nsenter": true,
	"chroot": true, "flock": true, "watch": true, "strace": true, "ltrace": true, "busybox": true,
	"command": true, "exec": true, "script": true, "sg": true, "prlimit": true, "numactl": true,
	"fakeroot": true, "faketime": true, "valgrind": true, "catchsegv": true, "setarch": true,
	"linux32": true, "linux64": true, "cpulimit": true, "systemd-run": true, "capsh": true,
	// Shells: "sh -c 'git push'" has the tail "git push". A longer script
	// is not parsed; see CommandPolicy.
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true,
}

// verdict is the outcome of a policy check.
type verdict int

const (
	refused     verdict = iota // no allow rule, or a deny rule
	needsReview                // an approve rule: refused in this build
	allowed
)

// decision is a policy check's outcome: the verdict, the rule that decided
// it ("" if none matched) and the program that runs (see resolve).
type decision struct {
	v    verdict
	rule string
	prog program
}

// check decides argv run in the working directory dir.
func (p CommandPolicy) check(argv []string, dir string) decision {
	prog := p.resolve(argv[0], dir)
	if rule, ok := p.matchAny(p.Deny, argv, prog, dir); ok {
		return decision{refused, rule, prog}
	}
	if rule, ok := p.matchAny(p.Approve, argv, prog, dir); ok {
		return decision{needsReview, rule, prog}
	}
	allow, spellings := p.Allow, prog.spellings()
	if !prog.system {
		// Only a rule that names a path allows a program outside the
		// executable directories, and only by its path.
		allow, spellings = pathRules(p.Allow), prog.paths()
	}
	if rule, ok := firstMatch(allow, spellings, argv[1:], false); ok {
		return decision{allowed, rule, prog}
	}
	return decision{refused, "", prog}
}

// matchAny matches patterns against argv and, if its program is a wrapper,
// against each tail of argv (fail closed: for Deny and Approve).
func (p CommandPolicy) matchAny(patterns, argv []string, prog program, dir string) (string, bool) {
	if rule, ok := firstMatch(patterns, prog.denySpellings(), argv[1:], true); ok {
		return rule, true
	}
	if !prog.wrapper() {
		return "", false
	}
	for i := 1; i < len(argv); i++ {
		inner := p.resolve(argv[i], dir)
		if rule, ok := firstMatch(patterns, inner.denySpellings(), argv[i+1:], true); ok {
			return rule, true
		}
	}
	return "", false
}

// firstMatch returns the first pattern that matches a spelling of the
// program alone, or the command line with the program so spelled.
func firstMatch(patterns, spellings, rest []string, badMatches bool) (string, bool) {
	tail := ""
	if len(rest) > 0 {
		tail = " " + strings.Join(rest, " ")
	}
	for _, pat := range patterns {
		if _, err := path.Match(pat, ""); err != nil {
			if badMatches {
				return pat, true
			}
			continue
		}
		for _, s := range spellings {
			m1, _ := lineMatch(pat, s+tail)
			m2, _ := path.Match(pat, s)
			if m1 || m2 {
				return pat, true
			}
		}
	}
	return "", false
}

// pathRules are the patterns whose program word names a path.
func pathRules(patterns []string) []string {
	var out []string
	for _, pat := range patterns {
		word, _, _ := strings.Cut(pat, " ")
		if strings.Contains(word, "/") {
			out = append(out, pat)
		}
	}
	return out
}

// lineMatch is path.Match over a command line, except that "*" and "?"
// also match "/": "git push*" must refuse "git push origin feature/x".
func lineMatch(pat, line string) (bool, error) {
	const slash = "\x00"
	return path.Match(strings.ReplaceAll(pat, "/", slash), strings.ReplaceAll(line, "/", slash))
}

// policyError explains a refusal to the agent, naming the deciding rule.
func (p CommandPolicy) policyError(argv []string, d decision) error {
	line := strings.Join(argv, " ")
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	switch {
	case d.v == allowed:
		return nil
	case d.v == needsReview:
		return fmt.Errorf("command %q matches approve rule %q: it needs human approval, which is not available in this build: refused", line, d.rule)
	case d.rule != "":
		return fmt.Errorf("command %q refused: matches deny rule %q", line, d.rule)
	case len(p.Allow) == 0:
		return fmt.Errorf("command %q refused: no commands are allowed in this workspace%s", line, allowHint(argv, d))
	case !d.prog.system && d.prog.path != "":
		return fmt.Errorf("command %q refused: program %q is outside the sandbox's executable directories (%s) and no allow rule names its path%s",
			line, argv[0], strings.Join(p.execDirs(), ":"), allowHint(argv, d))
	}
	return fmt.Errorf("command %q refused: no allow rule matches (allowed: %s)%s", line, summarize(p.Allow), allowHint(argv, d))
}

// allowHint tells the agent, and the person it asks, how a program comes
// to be allowed: the config key and the line to put there.
func allowHint(argv []string, d decision) string {
	rule := path.Base(argv[0])
	if !d.prog.system {
		rule = argv[0] + " *" // a path rule: the only kind that allows a workspace program
	}
	return fmt.Sprintf(`. To allow it, a human adds it to this server's commands.allow in the mcpbox config, e.g. commands: {allow: [..., %q]} `+
		`(the embedded default: mcpbox serve --print-config > mcpbox.yaml, edit, then mcpbox serve --config mcpbox.yaml)`, rule)
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
