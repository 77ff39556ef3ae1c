package cli

import (
	"path/filepath"

	"mcpbox/internal/admin"
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
	return admin.FindStateDir(wd, func(path, dir string) (string, bool) {
		c, err := loadConfig(path)
		if err != nil {
			return "", false
		}
		if c.StateDir == "" {
			return "", true
		}
		sd, err := filepath.Abs(specconv.Resolve(dir, c.StateDir))
		return sd, err == nil
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
