package admin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"mcpbox/internal/instance"
)

// projectConfigs are the config file names an admin command looks for in
// the current directory and its parents.
var projectConfigs = []string{"mcpbox.yaml", "mcpbox.yml"}

// ProjectConfig is the path of the project config in dir that the admin
// commands would read there (mcpbox.yaml, mcpbox.yml; the user's own or
// root's), "" if there is none: serve without --config names it, since
// it serves the embedded default instead.
func ProjectConfig(dir string) string {
	for _, name := range projectConfigs {
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && ownedByMe(fi) {
			return path
		}
	}
	return ""
}

// ServedConfig is the config file a live serve of stateDir runs, ""
// for the embedded default or when none runs: a hint naming mcpbox pin
// names it, since pin reads the config named, not the project's.
func ServedConfig(stateDir string) string {
	recs, _ := instance.List(stateDir)
	for _, r := range recs {
		if r.Config != "" {
			return r.Config
		}
	}
	return ""
}

// ConfigStateDir gives the state dir the config file at path (in the
// directory dir) names, absolute; "" if it names none (its project state
// dir applies); ok false if path is no valid config.
type ConfigStateDir func(path, dir string) (stateDir string, ok bool)

// FindStateDir is the state dir of the project the directory wd is in,
// for admin commands given neither --config nor --state-dir. From wd up
// to /, each directory's configs (configsIn: mcpbox.yaml first; each
// one's state_dir, given by configStateDir, or its project state dir)
// and the embedded default's
// project state dir for that directory are candidates; the nearest
// directory with a live instance decides: its one state dir with live
// instances, or, where instances of several configs run, a
// *ManyInstancesError (a command must not act on one of them by chance).
// With none live, the nearest candidate that a serve has used (its
// instances dir exists, and served, below): a stopped project's audit
// log is still read. A state dir that only `mcpbox run` or `mcpbox pin`
// made (a package store, a lock file) does not count, so that one run of
// a package in ~ does not make ~ a project that hides every serve.
func FindStateDir(wd string, configStateDir ConfigStateDir) (string, error) {
	var existing []string
	served := servedStateDirs()
	for d := wd; ; d = filepath.Dir(d) {
		var live []instance.Record // one per state dir
		for _, cand := range stateDirCandidates(d, configStateDir) {
			if recs, _ := instance.List(cand); len(recs) > 0 && !slices.ContainsFunc(live, func(r instance.Record) bool { return r.StateDir == cand }) {
				rec := recs[0]
				rec.StateDir = cand
				live = append(live, rec)
			}
			if fi, err := os.Stat(instance.Dir(cand)); err == nil && fi.IsDir() && served(cand) {
				existing = append(existing, cand) // a serve ran on it: not only `mcpbox run`'s package store
			}
		}
		switch {
		case len(live) == 1:
			return live[0].StateDir, nil
		case len(live) > 1:
			return "", &ManyInstancesError{Dir: d, Live: live}
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if len(existing) > 0 {
		return existing[0], nil
	}
	return "", &NoProjectError{Dir: wd}
}

// NoProjectError is FindStateDir's answer in a directory that no serve
// has run for, nor for a parent: it is in no project.
type NoProjectError struct{ Dir string }

func (e *NoProjectError) Error() string {
	return fmt.Sprintf("no mcpbox serve has run for %s or a parent directory: run the command in the project, or pass --config FILE or --state-dir DIR (mcpbox ps lists every running instance)", e.Dir)
}

// servedStateDirs reports whether a state dir is one a serve has used:
// registered (instance.Register), or under the instance root, where the
// project state dirs are. Any directory a config names is not enough:
// a config planted in a project (a cloned repository, a sandbox's
// writable output) may name a directory whose audit log it wrote itself.
func servedStateDirs() func(dir string) bool {
	root, err := instance.Root()
	if err != nil {
		return func(string) bool { return false }
	}
	// The registry is read only for a dir outside the root, once.
	registered := sync.OnceValue(func() []string {
		dirs, _ := instance.StateDirs(root)
		return dirs
	})
	return func(dir string) bool {
		return strings.HasPrefix(dir, root+string(filepath.Separator)) || slices.Contains(registered(), dir)
	}
}

// ManyInstancesError is FindStateDir's answer in a directory where
// instances of more than one config run: the command must be told which.
type ManyInstancesError struct {
	Dir  string
	Live []instance.Record // one of each state dir with live instances
}

// Listing is the client of a listing (ps, approvals) or of a request
// about one sandbox or approval ID, for FindStateDir's answer: where
// instances of several configs run for the directory, those of each
// answer, since a listing acts on none of them and an ID names the one it
// acts on (a command on a whole instance is told to say which); in a
// directory of no project, every instance of the user answers, as with
// --all.
func Listing(dir string, err error) (Client, error) {
	var none *NoProjectError
	if errors.As(err, &none) {
		return Client{StateDir: AllStateDirs}, nil
	}
	var many *ManyInstancesError
	if !errors.As(err, &many) {
		return Client{StateDir: dir}, err
	}
	c := Client{StateDirs: make([]string, len(many.Live))}
	for i, r := range many.Live {
		c.StateDirs[i] = r.StateDir
	}
	return c, nil
}

// StateDirOf is the state dir of e's live instance pid, for a command
// whose flags name one instance (mcpbox ui --instance PID): the pid
// decides which config's serve is meant.
func (e *ManyInstancesError) StateDirOf(pid int) (string, bool) {
	for _, l := range e.Live {
		if Runs(l.StateDir, pid) {
			return l.StateDir, true
		}
	}
	return "", false
}

// Runs reports whether a live instance with pid serves stateDir (as
// instance.List finds them: its liveness and peer checks).
func Runs(stateDir string, pid int) bool {
	recs, _ := instance.List(stateDir)
	return slices.ContainsFunc(recs, func(r instance.Record) bool { return r.PID == pid })
}

func (e *ManyInstancesError) Error() string {
	var each []string
	for _, r := range e.Live {
		what := "the embedded default"
		if r.Config != "" {
			what = r.Config
		}
		each = append(each, fmt.Sprintf("%s (state dir %s)", what, r.StateDir))
	}
	return fmt.Sprintf("instances of %d configs run for %s: %s; say which with --config FILE or --state-dir DIR", len(e.Live), e.Dir, strings.Join(each, ", "))
}

// maxConfigSize bounds the YAML files discovery reads as configs: a
// project directory may hold large YAML that is no mcpbox config.
const maxConfigSize = 1 << 20

// configsIn are the config files in dir that discovery considers, in
// order: mcpbox.yaml, mcpbox.yml, then the other *.yaml and *.yml files
// by name (a project may keep several configs, each served with
// --config; a file that is no mcpbox config is passed over by
// configStateDir). Only the user's own (or root's) regular files: a
// parent dir such as /tmp may hold one another user planted.
func configsIn(dir string) []string {
	names := slices.Clone(projectConfigs)
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); (ext == ".yaml" || ext == ".yml") && !slices.Contains(projectConfigs, e.Name()) {
				names = append(names, e.Name()) // ReadDir sorts by name
			}
		}
	}
	var out []string
	for _, name := range names {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err == nil && fi.Mode().IsRegular() && fi.Size() <= maxConfigSize && ownedByMe(fi) {
			out = append(out, path)
		}
	}
	return out
}

// stateDirCandidates are the state dirs a project in dir may use,
// without creating them: its configs', then the embedded default's.
func stateDirCandidates(dir string, configStateDir ConfigStateDir) []string {
	root, rerr := instance.Root()
	var out []string
	for _, path := range configsIn(dir) {
		sd, ok := configStateDir(path, dir)
		switch {
		case !ok:
		case sd != "":
			out = append(out, sd)
		case rerr == nil:
			if sd, err := instance.ProjectStateDir(root, path, dir); err == nil {
				out = append(out, sd)
			}
		}
	}
	if rerr == nil {
		if sd, err := instance.ProjectStateDir(root, "", dir); err == nil {
			out = append(out, sd)
		}
	}
	return out
}

// instancesFor lists the live instances of dir, or of every registered
// state dir for AllStateDirs.
func instancesFor(dir string) ([]instance.Record, error) {
	if dir != AllStateDirs {
		return instance.List(dir)
	}
	root, err := instance.Root()
	if err != nil {
		return nil, err
	}
	return instance.All(root)
}
