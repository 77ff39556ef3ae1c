package instance

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Root is the user's mcpbox state root: $XDG_STATE_HOME/mcpbox, else
// ~/.local/state/mcpbox. A relative XDG_STATE_HOME is ignored, as the XDG
// base directory spec asks.
func Root() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "mcpbox"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the state root: %w", err)
	}
	return filepath.Join(home, ".local", "state", "mcpbox"), nil
}

// ProjectStateDir is the state dir of a project under root: for a config
// file (configPath non-empty) keyed by its real path, for the embedded
// default by the real path of dir, the directory it serves. The config
// file or dir must exist.
func ProjectStateDir(root, configPath, dir string) (string, error) {
	key, err := Key(configPath, dir)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "projects", key), nil
}

// Key is NAME-HASH for a project (see ProjectStateDir): NAME the base name
// of the project directory, HASH 12 hex digits of SHA-256 over the kind
// and the real path. A config and the embedded default in one directory
// get different keys: they are different gateways.
func Key(configPath, dir string) (string, error) {
	kind, p := "default", dir
	if configPath != "" {
		kind, p = "config", configPath
	}
	if p == "" {
		return "", errors.New("project key: no config file or directory")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("project key of %s: %w", p, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("project key of %s: %w", p, err)
	}
	project := real
	if configPath != "" {
		project = filepath.Dir(real)
	}
	sum := sha256.Sum256([]byte(kind + "\x00" + real))
	return name(filepath.Base(project)) + "-" + hex.EncodeToString(sum[:6]), nil
}

// name makes a directory's base name safe and short for a path element.
func name(base string) string {
	var b strings.Builder
	for _, r := range base {
		switch {
		case b.Len() >= 40:
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == '.' && b.Len() > 0:
			b.WriteRune(r)
		default:
			b.WriteRune('_')
		}
	}
	if b.Len() == 0 || base == "/" {
		return "root"
	}
	return b.String()
}
