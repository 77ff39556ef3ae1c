package workspace

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// systemDirs are host places no sandbox may write to, nor to a parent of
// one (a parent of /etc is /).
// /run holds the system's and each user's runtime dirs (/run/user/UID,
// /run/systemd), whose sockets and service dirs run code: a D-Bus service
// file written to dbus-1/services runs as the user when its name is asked
// for. Only removable media mounted below it are not refused (mediaRoot).
var systemDirs = []string{
	"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/boot", "/dev", "/proc", "/sys", "/var/spool", "/run", "/var/run",
}

// mediaRoot is where udisks mounts removable media, one dir per user
// (/run/media/USER/LABEL): a project may live on one.
const mediaRoot = "/run/media"

// onMedia reports whether dir lies on a mounted medium below mediaRoot,
// not in mediaRoot or a user's dir of it.
func onMedia(dir string) bool {
	rel, err := filepath.Rel(mediaRoot, dir)
	return err == nil && filepath.IsLocal(rel) && strings.Count(rel, string(filepath.Separator)) >= 1
}

// homeSecrets are the places under a home dir that hold credentials or
// run code at login: no sandbox may write to them or to a parent of them.
var homeSecrets = []string{".ssh", ".gnupg", ".aws", ".config", ".kube", ".docker"}

// homeCode are the places under a home dir, not hidden, whose programs
// run as the user's own: ~/bin is on PATH by the stock ~/.profile, ~/go/bin
// by Go's install, and Node looks for a script's modules in
// ~/node_modules.
var homeCode = []string{"bin", "go/bin", "node_modules"}

// CredentialDir is the credential dir of home (~/.ssh, ~/.aws, ...: the
// ones Protected keeps writable mounts out of) that dir, a real path, is
// or lies in, or "". A read-only mount of one is the config's choice (a
// git server may need ~/.ssh) but is worth a warning: the server reads
// the keys, and with a network may send them out.
func CredentialDir(home, dir string) string {
	dir = filepath.Clean(dir)
	for _, c := range credentialDirs(home) {
		if within(dir, c) {
			return c
		}
	}
	return ""
}

// credentialDirs are home's credential dirs (homeSecrets), each as it is
// named and, when it is a link (a dotfile manager's ~/.ssh ->
// ~/dotfiles/ssh), where it leads, and where the links directly in it
// lead (stow's ~/.ssh/config -> ~/dotfiles/ssh/config, ~/.config/gh ->
// ~/dotfiles/gh): the keys are there. A link that leads to the home or
// above it is not followed: the home has its own rules, and following it
// would make every path a credential dir.
func credentialDirs(home string) []string {
	var out []string
	add := func(h, p string) {
		if r := ResolveExisting(p); within(h, r) {
			out = append(out, filepath.Clean(p)) // to the home or above
		} else {
			out = append(out, resolvedAll(p)...)
		}
	}
	for _, h := range resolvedAll(home) {
		for _, s := range homeSecrets {
			dir := filepath.Join(h, s)
			add(h, dir)
			ents, _ := os.ReadDir(ResolveExisting(dir))
			for i, e := range ents {
				if i == maxLinksRead {
					break
				}
				if e.Type()&fs.ModeSymlink != 0 {
					add(h, filepath.Join(dir, e.Name()))
				}
			}
		}
	}
	return out
}

// maxLinksRead bounds the entries of a credential dir looked at for links.
const maxLinksRead = 4096

// Protected describes the host places a writable mount (an output, a rw
// mount) must stay clear of. Paths are resolved (symlinks followed) by
// Check; an empty field protects nothing.
type Protected struct {
	// Home is the user's home dir: the dir itself and any parent are
	// refused, its credential dirs (.ssh, .gnupg, .aws, .config, .kube,
	// .docker, and where links in them lead) and what is in them, and
	// its other hidden entries (.bashrc, .local, ...) and what is in them.
	Home string
	// StateDir is mcpbox's state dir: it, a parent and anything in it are
	// refused (other agents' workspaces, the admin socket, the audit).
	StateDir string
	// Root is mcpbox's state root, which holds every project's default
	// state dir (their tokens, dashboard secrets, audits, sockets):
	// refused alike, also when StateDir lies elsewhere.
	Root string
	// Input is the sandbox's input: it and a parent are refused, or the
	// read-only input would be writable through the output.
	Input string
	// Project is the config's directory (for flags, the working dir). A
	// place in the home's hidden entries is refused (see Check) unless it
	// lies in the project, and the project in that hidden dir too: a
	// project kept in ~/.work writes its own output.
	Project string
}

// Check refuses dir, a real path, if it is or contains a protected place,
// or lies in one that must not be written at all. The error names dir and
// the place and wraps ErrProtected.
func (p Protected) Check(dir string) error {
	dir = filepath.Clean(dir)
	refuse := func(place, why string) error {
		return fmt.Errorf("%s would let a sandbox write %s (%s): %w", dir, place, why, ErrProtected)
	}
	for _, s := range systemDirs {
		if overlaps(dir, s) && !onMedia(dir) {
			return refuse(s, "a system directory")
		}
	}
	// The user's runtime dir where it is not under /run.
	if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
		for _, r := range resolvedAll(rt) {
			if overlaps(dir, r) {
				return refuse(r, "the user's runtime dir, whose sockets and service dirs (the session bus's, systemd's) run code as the user")
			}
		}
	}
	if p.Home != "" {
		for _, h := range resolvedAll(p.Home) {
			if within(h, dir) {
				return refuse(h, "the home directory")
			}
		}
		for _, c := range credentialDirs(p.Home) {
			if overlaps(dir, c) {
				return refuse(c, "credentials or login code")
			}
		}
	}
	// A repository's hooks and config run code at its next git command.
	parts := strings.Split(dir, string(filepath.Separator))
	if i := slices.Index(parts, ".git"); i >= 0 {
		git := strings.Join(parts[:i+1], string(filepath.Separator))
		return refuse(git, "a git repository's own files, whose hooks and config run code at its next git command")
	}
	for _, st := range resolvedAll(p.StateDir) {
		if overlaps(dir, st) {
			return refuse(st, "mcpbox's state dir")
		}
	}
	for _, r := range resolvedAll(p.Root) {
		if overlaps(dir, r) {
			return refuse(r, "mcpbox's state root, every project's state")
		}
	}
	// The home's dotfiles and dot dirs are other programs' settings and
	// code: ~/.bashrc, ~/.profile, ~/.gitconfig, ~/.local/bin, an
	// editor's or agent's config. A list would miss one.
	for _, h := range resolvedAll(p.Home) {
		if hidden := HiddenEntry(h, dir); hidden != "" && !p.inProject(dir, hidden) {
			return refuse(hidden, "a hidden file or directory of the home directory, whose settings and code other programs run")
		}
		for _, c := range homeCode {
			if overlaps(dir, filepath.Join(h, c)) {
				return refuse(filepath.Join(h, c), "programs that run as yours")
			}
		}
		// Where a dotfile manager's links lead (~/.bashrc ->
		// ~/dotfiles/bashrc): writing there, or a dir holding it, is
		// writing the dotfile.
		for _, to := range hiddenLinks(h) {
			if overlaps(dir, to) {
				return refuse(to, "where a hidden entry of the home directory leads, whose settings and code other programs run")
			}
		}
	}
	for _, in := range resolvedAll(p.Input) {
		if within(in, dir) {
			return refuse(in, "the read-only input")
		}
	}
	return nil
}

// HiddenEntry is the entry directly in home (a real path) that dir lies
// in, when its name begins with a dot (~/.bashrc, ~/.local), or "".
func HiddenEntry(home, dir string) string {
	rel, err := filepath.Rel(home, dir)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	first, _, _ := strings.Cut(rel, string(filepath.Separator))
	if !strings.HasPrefix(first, ".") {
		return ""
	}
	return filepath.Join(home, first)
}

// hiddenLinks are where the links among home's hidden entries lead
// (resolved), except a link to the home or above it, which the home's own
// rules cover.
func hiddenLinks(home string) []string {
	ents, _ := os.ReadDir(home)
	var out []string
	for i, e := range ents {
		if i == maxLinksRead {
			break
		}
		if e.Type()&fs.ModeSymlink == 0 || !strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if to := ResolveExisting(filepath.Join(home, e.Name())); !within(home, to) {
			out = append(out, to)
		}
	}
	return out
}

// inProject reports whether dir lies in the project and the project in
// hidden.
func (p Protected) inProject(dir, hidden string) bool {
	for _, proj := range resolvedAll(p.Project) {
		if within(proj, hidden) && within(dir, proj) {
			return true
		}
	}
	return false
}

// resolvedAll returns p as given and with symlinks resolved
// (ResolveExisting), cleaned; none for "".
func resolvedAll(p string) []string {
	if p == "" {
		return nil
	}
	out := []string{filepath.Clean(p)}
	if r := ResolveExisting(p); r != out[0] {
		out = append(out, r)
	}
	return out
}

// ResolveExisting is p with the symlinks of its longest existing prefix
// resolved, the rest kept: a place not made yet (a state root before the
// first serve) is compared where it will be, also when a directory above
// it is a symlink (a home dir on another disk).
func ResolveExisting(p string) string {
	rest := ""
	for d := filepath.Clean(p); ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest)
		}
		if d == filepath.Dir(d) {
			return filepath.Clean(p)
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

// within reports whether a is b or beneath b.
func within(a, b string) bool {
	return a == b || b == "/" || strings.HasPrefix(a, b+string(filepath.Separator))
}

// overlaps reports whether a and b are the same, or one contains the other.
func overlaps(a, b string) bool { return within(a, b) || within(b, a) }
