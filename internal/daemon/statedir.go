package daemon

import (
	"fmt"
	"os"
	"path/filepath"

	"mcpbox/internal/admin"
	"mcpbox/internal/config"
	"mcpbox/internal/instance"
	"mcpbox/internal/specconv"
)

// FindStateDir is the state dir of the project the directory wd is in,
// for admin commands given neither --config nor --state-dir (see
// admin.FindStateDir): a project config's state_dir, resolved against
// its directory, or its project state dir. seen, if not nil, is called
// with each valid project config read on the way and the state dir that
// config's serve uses.
func FindStateDir(wd string, seen func(path string, c *config.Config, stateDir string)) (string, error) {
	return admin.FindStateDir(wd, func(path, dir string) (string, bool) {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", false
		}
		c, err := config.Load(path, data)
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

// TokenStateDir is the state dir whose token `mcpbox token rotate`
// without flags replaces for the directory wd: the project's, as
// FindStateDir finds it (so the token rotated is the one the serve
// mcpbox ps shows there wants), or where no serve has run, the state dir
// of def (the embedded default) served in wd. It refuses a stopped
// project whose config has clients, whose tokens are in the config; with
// a serve running, RotateToken asks its record.
func TokenStateDir(wd string, def *config.Config) (string, error) {
	withClients := map[string]string{} // state dir → a project config with clients that uses it
	dir, err := FindStateDir(wd, func(path string, c *config.Config, sd string) {
		if len(c.Clients) > 0 && withClients[sd] == "" {
			withClients[sd] = path
		}
	})
	if err != nil {
		return specconv.StateDir(def, "", wd, "")
	}
	if recs, _ := instance.List(dir); len(recs) == 0 && withClients[dir] != "" {
		return "", fmt.Errorf("%s has clients: their tokens come from the config (clients[].token.from), not from a token file", withClients[dir])
	}
	return dir, nil
}
