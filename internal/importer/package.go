package importer

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"mcpbox/internal/config"
)

// PackageOf recognises a command that fetches and runs a registry package
// (npx -y PKG, uvx PKG, pnpm dlx, pipx run, ...): pkg in config syntax
// (npm:NAME@VERSION) and the package's own args; pkg "" for one that is
// recognised but must stay a command (it names a bin of its own); ok
// false for any other command; an error for a runner form a pinned
// install cannot honour. The
// caller supplies it (internal/pkginstall's FromCommand), since importer
// does not import its neighbours.
type PackageOf func(argv []string) (pkg string, args []string, ok bool, err error)

// Host answers what Convert and ConvertPackages ask of the host, for
// paths as a client config names them ("~/" for the home directory). The
// caller supplies it (the user's home, daemon.HoldsData, daemon.IsDir):
// importer reads no files.
type Host struct {
	// Homes are the user's home directory, absolute, as $HOME names it
	// and with its links resolved: a path in it is protected as the same
	// path under ~ is (~/.ssh, ~ itself), whatever the home is called.
	// Homes under /home, /Users and /var/home are known without it.
	Homes []string
	// HoldsData reports whether the file path exists and holds data.
	// Nil: none does.
	HoldsData func(path string) bool
	// IsDir reports whether path is a directory: a name with a dot in it
	// (my.repo) is taken for a file unless it is. Nil: none is.
	IsDir func(path string) bool
}

// ConvertPackages turns res's servers whose command pkgOf recognises into
// package servers (package: + args), so that the config says what runs;
// `mcpbox serve` would recognise the command anyway. Arguments naming host
// directories become read-only mounts under /data with the argument
// rewritten, and env values naming host files (MEMORY_FILE_PATH=...) move
// into the server's output. The hints above each server say what was
// changed; res.Notes name the moved files that hold data (host).
func ConvertPackages(res *Result, pkgOf PackageOf, host Host) {
	for _, s := range res.Config.Servers {
		if s.Command == nil {
			continue
		}
		orig := strings.Join(s.Command, " ")
		pkg, args, ok, err := pkgOf(s.Command)
		if _, rule := launcher(s.Command); rule != "" && (err != nil || !ok) {
			// Not turned into a package: its paths stay as written
			// (local() left the note of a package runner to here).
			res.Notes = append(res.Notes, hostPathNote(s.Name, hostPaths(s.Command))...)
		}
		if err != nil {
			res.Hints[s.Name] = keepProject(res.Hints[s.Name], append([]string{
				"mcpbox cannot run this command as a pinned package, and serve refuses it:",
				err.Error(),
				"Write it as package: npm:NAME@VERSION (or pypi:...) with args.",
			}, hostPathHints(s.Command)...))
			continue
		}
		if !ok {
			continue
		}
		if pkg == "" {
			// It stays a command (npx -p PKG BIN, uvx --from PKG BIN); its
			// host directories are mounted as a package server's are.
			hints := []string{
				"mcpbox installs this command's package outside the sandbox at the first",
				"start, pins it in the lock file beside this config and runs the named",
				"bin read-only with no network (it stays a command: package: runs a",
				"package's own bin).",
			}
			argv := &config.Server{Name: s.Name, Args: s.Command[1:], Filesystem: s.Filesystem}
			mounted, missing := rewriteHostDirs(argv, host)
			hints = append(hints, mounted...)
			res.Notes = append(res.Notes, missing...)
			s.Command, s.Filesystem.Mounts = append(s.Command[:1:1], argv.Args...), argv.Filesystem.Mounts
			rest := unmounted(s.Command)
			hints = append(hints, forwardHints(loopbackForwards(s.Command))...)
			res.Hints[s.Name] = keepProject(res.Hints[s.Name], append(hints, hostPathHints(rest)...))
			res.Notes = append(res.Notes, hostPathNote(s.Name, hostPaths(rest))...)
			continue
		}
		s.Package, s.Args, s.Command = pkg, args, nil
		hints := []string{
			"Was: " + orig,
			"mcpbox installs the package outside the sandbox at the first start",
			"(stderr shows progress), pins its version and hashes in the lock file,",
			"and runs it read-only with no network. Its own directory is read-only:",
			"a server that writes files needs them under /workspace/output or /tmp.",
		}
		mounted, missing := rewriteHostDirs(s, host)
		hints = append(hints, mounted...)
		res.Notes = append(res.Notes, missing...)
		moved, notes := moveHostFiles(s, host.HoldsData)
		hints = append(hints, moved...)
		res.Notes = append(res.Notes, notes...)
		hints = append(hints, defaultWrites(s)...)
		rest := unmounted(s.Args) // host paths not rewritten (files)
		hints = append(hints, hostPathHints(rest)...)
		res.Notes = append(res.Notes, hostPathNote(s.Name, hostPaths(rest))...)
		res.Notes = append(res.Notes, relativePathNote(s.Name, s.Args, true)...)
		hints = append(hints, networkHints(s)...)
		hints = append(hints, forwardHints(loopbackForwards(s.Args))...)
		res.Hints[s.Name] = keepProject(res.Hints[s.Name], hints)
	}
}

// keepProject puts the line naming the ~/.claude.json project a server
// came from (convert's first hint), if old has one, before hints.
func keepProject(old, hints []string) []string {
	if len(old) > 0 && strings.HasPrefix(old[0], projectHint) {
		return append([]string{old[0]}, hints...)
	}
	return hints
}

// packageHosts are the API hosts of well-known packages that call one
// by default.
var packageHosts = map[string]string{
	"npm:@modelcontextprotocol/server-github":       "api.github.com",
	"npm:@modelcontextprotocol/server-gitlab":       "gitlab.com",
	"npm:@modelcontextprotocol/server-slack":        "slack.com",
	"npm:@modelcontextprotocol/server-brave-search": "api.search.brave.com",
	"npm:@modelcontextprotocol/server-google-maps":  "maps.googleapis.com",
	"npm:@notionhq/notion-mcp-server":               "api.notion.com",
}

// networkHints say which hosts a package server will want to reach (its
// package's API host, and those of the http(s) URLs in its env, such as
// GITLAB_API_URL), and the egress rule to allow them: the sandbox has
// no network, and the server's calls would fail with connection errors.
func networkHints(s *config.Server) []string {
	var hosts []string
	add := func(h string) {
		// This machine is reached by a forward, not egress (forwardHints).
		if h != "" && !config.IsLoopbackHost(h) && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	for _, v := range s.Env {
		if u, err := url.Parse(v.Value); err == nil && (u.Scheme == "https" || u.Scheme == "http") {
			add(u.Hostname())
		}
	}
	if len(hosts) == 0 { // an API URL in the env replaces the default host
		add(packageHosts[packageName(s.Package)])
	}
	if len(hosts) == 0 {
		return nil
	}
	var rules []string
	for _, h := range hosts {
		rules = append(rules, "{host: "+h+"}")
	}
	return []string{
		"The sandbox has no network, and this server calls " + strings.Join(hosts, ", ") + ".",
		"To allow it, uncomment:",
		"network: {egress: [" + strings.Join(rules, ", ") + "]}",
	}
}

// packageName is a package reference without its version.
func packageName(ref string) string {
	if i := strings.LastIndex(ref, "@"); i > strings.Index(ref, ":")+1 {
		return ref[:i]
	}
	return ref
}

// unmounted are the arguments rewriteHostDirs did not point at a mount.
func unmounted(args []string) []string {
	var rest []string
	for _, a := range args {
		if !strings.HasPrefix(a, "/data/") && !strings.Contains(a, "=/data/") {
			rest = append(rest, a)
		}
	}
	return rest
}

// rewriteHostDirs mounts the host directories s's args name (read-only,
// at /data/NAME) and rewrites the args to match. A name with a dot is
// taken for a file unless isDir says it is a directory. notes name the
// mounted dirs that do not exist here: serve cannot start s without them.
func rewriteHostDirs(s *config.Server, host Host) (hints, notes []string) {
	taken := map[string]bool{}
	for i, a := range s.Args {
		flag, val, isFlag := strings.Cut(a, "=")
		if !isFlag || !strings.HasPrefix(flag, "-") {
			flag, val = "", a
		}
		if isRelativePath(val) {
			hints = append(hints, fmt.Sprintf("%s is a relative path: the client resolved it against its own working directory, the sandbox against /workspace/output; write the directory meant as an absolute path (then import mounts it) or give it as filesystem.input.", val))
			continue
		}
		if !isHostPath(val) || driveRE().MatchString(val) ||
			strings.Contains(path.Base(val), ".") && (host.IsDir == nil || !host.IsDir(val)) {
			continue // not a host path, Windows, or most likely a file
		}
		if why := protectedSource(val, host.Homes...); why != "" {
			hints = append(hints, fmt.Sprintf("%s is not mounted: %s; give the server a directory of its own instead.", val, why))
			continue
		}
		base := sanitizeName(path.Base(path.Clean(val)))
		target := "/data/" + base
		for n := 2; taken[target]; n++ {
			target = "/data/" + base + "-" + strconv.Itoa(n)
		}
		taken[target] = true
		s.Filesystem.Mounts = append(s.Filesystem.Mounts, config.Mount{Source: val, Target: target, Mode: config.ModeRO})
		if flag != "" {
			s.Args[i] = flag + "=" + target
		} else {
			s.Args[i] = target
		}
		hints = append(hints, fmt.Sprintf("%s is mounted read-only at %s (set mode: rw to let the server write there).", val, target))
		if host.IsDir != nil && !host.IsDir(val) {
			hints = append(hints, fmt.Sprintf("%s does not exist here: create it before serving.", val))
			notes = append(notes, fmt.Sprintf("server %q mounts %s, which does not exist here: serve cannot start the server until it does (create it, or change the mount)", s.Name, val))
		}
	}
	return hints, notes
}

// moveHostFiles points env values that name host files into the server's
// output, which is kept per agent. notes name the files that exist and
// hold data, which the server no longer sees.
func moveHostFiles(s *config.Server, holds func(string) bool) (hints, notes []string) {
	for i, v := range s.Env {
		if !pathNameRE().MatchString(v.Name) || !isHostPath(v.Value) || !strings.Contains(path.Base(v.Value), ".") {
			continue
		}
		to := "/workspace/output/" + path.Base(v.Value)
		hints = append(hints, fmt.Sprintf("env %s was %s, now %s (in the server's output).", v.Name, v.Value, to))
		s.Env[i].Value = to
		if holds != nil && holds(v.Value) {
			notes = append(notes, fmt.Sprintf("server %q: %s (env %s) holds data the sandboxed server will not see: it starts with an empty %s; to keep the data, copy the file into the server's output dir (STATE_DIR/workspaces/AGENT/%s/output, AGENT _local over stdio)", s.Name, v.Value, v.Name, to, s.Name))
		}
	}
	return hints, notes
}

// packageWrites are env settings that keep well-known packages from
// writing into their own directory, which is read-only in the sandbox:
// server-memory keeps its graph beside its code unless told otherwise.
var packageWrites = map[string]config.EnvVar{
	"npm:@modelcontextprotocol/server-memory": {Name: "MEMORY_FILE_PATH", Value: "/workspace/output/memory.jsonl"},
}

// defaultWrites sets the env of packageWrites for s's package unless the
// client config set that variable already.
func defaultWrites(s *config.Server) []string {
	w, ok := packageWrites[packageName(s.Package)]
	if !ok {
		return nil
	}
	for _, v := range s.Env {
		if v.Name == w.Name {
			return nil
		}
	}
	s.Env = append(s.Env, config.EnvVar{Name: w.Name, Value: w.Value})
	return []string{fmt.Sprintf("env %s=%s: the package writes beside its code by default, which is read-only here.", w.Name, w.Value)}
}
