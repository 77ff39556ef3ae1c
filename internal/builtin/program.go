package builtin

import (
	"os"
	"path"
	"path/filepath"
	"strings"
)

// program is a command's argv[0] as the policy sees it.
type program struct {
	given  string // argv[0]
	found  string // the executable directory entry a bare name was found as
	abs    string // argv[0] cleaned, if it is an absolute path
	path   string // the file that runs: symlinks resolved; "" if none was found
	system bool   // the program is the sandbox's: in an executable directory
	// inDir: argv[0] names an entry of an executable directory (a bare
	// name found there, or an absolute path into one), so its base name
	// is the name of a system program.
	inDir bool
}

// resolve finds the program argv0 names, run in the working directory dir.
// A bare name is looked up in the executable directories; a path is taken
// relative to dir. Symlinks are followed ("/bin/git" is "/usr/bin/git" on
// a merged /usr), and ".." is applied after them, as the kernel does.
func (p CommandPolicy) resolve(argv0, dir string) program {
	pr := program{given: argv0}
	if !strings.Contains(argv0, "/") {
		for _, d := range p.execDirs() {
			if c := d + "/" + argv0; isExecutable(c) {
				pr.found = c
				break
			}
		}
		// A bare name is the sandbox's program of that name, found or not
		// (a name not found runs nothing).
		pr.system, pr.inDir = true, true
		if pr.found != "" {
			pr.path = evalExecutable(pr.found)
		}
		return pr
	}
	cand := argv0
	if path.IsAbs(argv0) {
		pr.abs = path.Clean(argv0)
		pr.system = p.inExecDir(pr.abs)
		pr.inDir = pr.system
	} else {
		cand = dir + "/" + argv0 // not path.Join: ".." must follow symlinks
	}
	pr.path = evalExecutable(cand)
	if pr.path != "" && p.inExecDir(pr.path) {
		pr.system = true
	}
	return pr
}

// spellings are the ways a rule may name the program: every one, for Deny
// and Approve (fail closed), and for Allow if the program is the system's.
// The base name of a path given is left out unless the path names an
// entry of an executable directory: a workspace file ("./ls", or
// "/workspace/output/ls", a symlink to rm) does not pass for the system
// program of its name.
func (pr program) spellings() []string {
	s := pr.paths()
	if pr.inDir {
		s = append(s, path.Base(pr.given))
	}
	if pr.path != "" {
		s = append(s, path.Base(pr.path))
	}
	return dedupe(s)
}

// denySpellings adds the base name of the path given to spellings.
func (pr program) denySpellings() []string {
	return dedupe(append(pr.spellings(), path.Base(pr.given)))
}

// paths are the spellings of the program by path: as given, cleaned, the
// directory entry found, and the file that runs.
func (pr program) paths() []string {
	var s []string
	if strings.Contains(pr.given, "/") {
		s = append(s, pr.given)
	}
	for _, p := range []string{pr.abs, pr.found, pr.path} {
		if p != "" {
			s = append(s, p)
		}
	}
	return s
}

// wrapper reports whether the program runs a command from its arguments.
func (pr program) wrapper() bool {
	for _, s := range pr.denySpellings() {
		if wrappers[s] {
			return true
		}
	}
	return false
}

func (p CommandPolicy) execDirs() []string {
	if p.dirs != nil {
		return p.dirs
	}
	return execDirs
}

// inExecDir reports whether file is directly in an executable directory,
// spelled as configured or with its symlinks resolved.
func (p CommandPolicy) inExecDir(file string) bool {
	parent := path.Dir(file)
	for _, d := range p.execDirs() {
		if parent == d {
			return true
		}
		if r, err := filepath.EvalSymlinks(d); err == nil && parent == r {
			return true
		}
	}
	return false
}

// evalExecutable resolves the symlinks of file, "" unless it is then an
// executable regular file.
func evalExecutable(file string) string {
	r, err := filepath.EvalSymlinks(file)
	if err != nil || !isExecutable(r) {
		return ""
	}
	if !path.IsAbs(r) {
		return ""
	}
	return r
}

func isExecutable(file string) bool {
	fi, err := os.Stat(file)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func dedupe(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := s[:0:0]
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
