package cli

import (
	"mcpbox/internal/admin"
	"mcpbox/internal/daemon"
)

// allStateDirs stands for every registered state dir where adminFlags
// return a dir (--all); the admin client reaches every instance of each.
const allStateDirs = admin.AllStateDirs

// findStateDir is the state dir of the project the directory wd is in,
// for admin commands given neither --config nor --state-dir
// (daemon.FindStateDir).
func findStateDir(wd string) (string, error) {
	return daemon.FindStateDir(wd, nil)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
