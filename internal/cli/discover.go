package cli

import (
	"path/filepath"

	"mcpbox/internal/admin"
	"mcpbox/internal/config"
	"mcpbox/internal/specconv"
)

// allStateDirs stands for every registered state dir where adminFlags
// return a dir (--all); the admin client reaches every instance of each.
const allStateDirs = admin.AllStateDirs

// findStateDir is the state dir of the project the directory wd is in,
// for admin commands given neither --config nor --state-dir (see
// admin.FindStateDir): a project config's state_dir, resolved against
// its directory, or its project state dir.
func findStateDir(wd string) (string, error) {
	return findStateDirSeeing(wd, nil)
}

// findStateDirSeeing is findStateDir, and calls seen, if not nil, with
// each valid project config it reads on the way and the state dir that
// config's serve uses.
func findStateDirSeeing(wd string, seen func(path string, c *config.Config, stateDir string)) (string, error) {
	return admin.FindStateDir(wd, func(path, dir string) (string, bool) {
		c, err := loadConfig(path)
		if err != nil {
			return "", false
		}
		var sd string
		if c.StateDir != "" {
			if sd, err = filepath.Abs(specconv.Resolve(dir, c.StateDir)); err != nil {
				return "", false
			}
		}
		if seen != nil {
			used := sd
			if used == "" {
				used, _ = specconv.ProjectStateDir(path, dir)
			}
			seen(path, c, used)
		}
		return sd, true
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
