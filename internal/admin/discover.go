package admin

import (
	"fmt"
	"os"
	"path/filepath"

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

// ConfigStateDir gives the state dir the config file at path (in the
// directory dir) names, absolute; "" if it names none (its project state
// dir applies); ok false if path is no valid config.
type ConfigStateDir func(path, dir string) (stateDir string, ok bool)

// FindStateDir is the state dir of the project the directory wd is in,
// for admin commands given neither --config nor --state-dir. From wd up
// to /, each directory's project config (its state_dir, given by
// configStateDir, or its project state dir) and the embedded default's
// project state dir for that directory are candidates; the first with a
// live instance wins. With none live, the nearest candidate that exists
// (a stopped project's audit log is still read).
func FindStateDir(wd string, configStateDir ConfigStateDir) (string, error) {
	var existing []string
	for d := wd; ; d = filepath.Dir(d) {
		for _, cand := range stateDirCandidates(d, configStateDir) {
			if recs, _ := instance.List(cand); len(recs) > 0 {
				return cand, nil
			}
			if fi, err := os.Stat(cand); err == nil && fi.IsDir() {
				existing = append(existing, cand)
			}
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if len(existing) > 0 {
		return existing[0], nil
	}
	return "", fmt.Errorf("no mcpbox serve has run for %s or a parent directory: run the command in the project, or pass --config FILE or --state-dir DIR (mcpbox ps --all lists every running instance)", wd)
}

// stateDirCandidates are the state dirs a project in dir may use,
// without creating them: its config's, then the embedded default's.
func stateDirCandidates(dir string, configStateDir ConfigStateDir) []string {
	root, rerr := instance.Root()
	var out []string
	for _, name := range projectConfigs {
		path := filepath.Join(dir, name)
		// Only the user's own (or root's) config: a parent dir such as
		// /tmp may hold one another user planted.
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || !ownedByMe(fi) {
			continue
		}
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
