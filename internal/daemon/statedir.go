package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"mcpbox/internal/admin"
	"mcpbox/internal/config"
	"mcpbox/internal/instance"
	"mcpbox/internal/specconv"
)

// ErrReadingConfig marks LoadConfig's error when the file could not be
// read (rather than parsed or checked).
var ErrReadingConfig = errors.New("reading config")

// LoadConfig reads, parses and checks the config file at path.
func LoadConfig(path string) (*config.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReadingConfig, err)
	}
	defer f.Close()
	// Read no more than Parse takes (a config named /dev/zero, a log).
	data, err := io.ReadAll(io.LimitReader(f, config.MaxFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReadingConfig, err)
	}
	return config.Load(path, data)
}

// LoadConfigOrDefault loads the config file at path, or, when path is
// empty, def (the embedded default, named so in errors). base is the
// directory the config's relative paths are resolved against: the
// file's, or for the default the current directory. Beside a config the
// user wrote in the current directory, which the admin commands (ps,
// approvals) find there, the default is refused, naming the flag: cmd
// (pin, update, login) starts servers and runs the config's cmd: secret
// references, so it reads a project's config only when named (a cloned
// repository's may be hostile), and on the default it has nothing to do
// (its built-in server is not pinned, has no package, logs in nowhere).
// `mcpbox pin --check` there passed, checking the default; `mcpbox update
// --check memory` said only that the config has no server memory.
func LoadConfigOrDefault(path string, def []byte, cmd string) (c *config.Config, base string, err error) {
	if path == "" {
		if c, err = config.Load("(embedded default)", def); err != nil {
			return nil, "", err
		}
		if base, err = os.Getwd(); err == nil {
			if p := admin.ProjectConfig(base); p != "" {
				return nil, "", fmt.Errorf("%s is here: mcpbox %s --config %[1]s uses it (without --config, %[2]s would read the embedded default, as serve does)", filepath.Base(p), cmd)
			}
		}
		return c, base, err
	}
	if c, err = LoadConfig(path); err != nil {
		return nil, "", err
	}
	return c, filepath.Dir(path), nil
}

// AdminDir is the state dir an admin command's flags name: --state-dir
// (stateDir), the state_dir of --config (configPath), admin.AllStateDirs
// for --all, or with none of them the state dir of the project the
// current directory is in (FindStateDir; an *admin.ManyInstancesError
// where instances of several configs run there).
func AdminDir(configPath, stateDir string, all bool) (string, error) {
	named := 0
	for _, set := range []bool{configPath != "", stateDir != "", all} {
		if set {
			named++
		}
	}
	switch {
	case named > 1:
		return "", errors.New("--config, --state-dir and --all are one at a time")
	case all:
		return admin.AllStateDirs, nil
	case stateDir != "":
		return stateDir, nil
	}
	if configPath == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		return FindStateDir(wd, nil)
	}
	c, err := LoadConfig(configPath)
	if err != nil {
		return "", err
	}
	return specconv.ConfigStateDir(c, configPath)
}

// InstanceAdminDir is AdminDir for a command whose flags name one
// instance by pid (mcpbox ui --instance PID; 0 for none): where serves
// of several configs run in the project, the pid says which; and given
// neither --config nor --state-dir, a pid that is none of the project's
// (or run outside any project) names the state dir of this user's serve
// with that pid, wherever it runs (the instances mcpbox ps --all lists).
func InstanceAdminDir(configPath, stateDir string, all bool, pid int) (string, error) {
	dir, err := AdminDir(configPath, stateDir, all)
	if pid <= 0 || configPath != "" || stateDir != "" || all {
		return dir, err
	}
	many := (*admin.ManyInstancesError)(nil)
	if errors.As(err, &many) {
		if d, ok := many.StateDirOf(pid); ok {
			return d, nil
		}
	}
	if err == nil && admin.Runs(dir, pid) {
		return dir, nil
	}
	var found []string
	if root, rerr := instance.Root(); rerr == nil {
		dirs, _ := instance.StateDirs(root)
		for _, d := range dirs {
			if admin.Runs(d, pid) {
				found = append(found, d)
			}
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no mcpbox serve of yours has pid %d (mcpbox ps --all lists every running instance)", pid)
	case 1:
		return found[0], nil
	}
	// One serve has one state dir: a second record of its pid was
	// planted (a state dir a sandbox can write), and which is real is
	// not for this lookup to guess.
	return "", fmt.Errorf("records of pid %d are in %d state dirs (%s): say which with --state-dir DIR", pid, len(found), strings.Join(found, ", "))
}

// FindStateDir is the state dir of the project the directory wd is in,
// for admin commands given neither --config nor --state-dir (see
// admin.FindStateDir): a project config's state_dir, resolved against
// its directory, or its project state dir. seen, if not nil, is called
// with each valid project config read on the way and the state dir that
// config's serve uses.
func FindStateDir(wd string, seen func(path string, c *config.Config, stateDir string)) (string, error) {
	return admin.FindStateDir(wd, func(path, dir string) (string, bool) {
		c, err := LoadConfig(path)
		if err != nil {
			return "", false
		}
		var sd string
		if c.StateDir != "" {
			if sd, err = filepath.Abs(specconv.Resolve(dir, c.StateDir)); err != nil {
				return "", false
			}
			if specconv.CheckStateDir(c, dir) != nil {
				return "", false // another project's: serve refuses it, and so does this
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
// of def (the embedded default) served in wd. It refuses a project whose
// config has clients, whose tokens are in the config, unless a serve
// running there reads the token file (its record says so).
func TokenStateDir(wd string, def *config.Config) (string, error) {
	withClients := map[string]string{} // state dir → a project config with clients that uses it
	dir, err := FindStateDir(wd, func(path string, c *config.Config, sd string) {
		if len(c.Clients) > 0 && withClients[sd] == "" {
			withClients[sd] = path
		}
	})
	if many := (*admin.ManyInstancesError)(nil); errors.As(err, &many) {
		return "", err
	}
	if err != nil {
		return specconv.StateDir(def, "", wd, "")
	}
	recs, _ := instance.List(dir)
	reads := slices.ContainsFunc(recs, func(r instance.Record) bool { return r.TokenFile != "" })
	if p := withClients[dir]; p != "" && !reads {
		return "", fmt.Errorf("%s has clients: their tokens come from the config (clients[].token.from), not from a token file", p)
	}
	return dir, nil
}
