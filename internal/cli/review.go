package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"mcpbox/internal/admin"
	"mcpbox/internal/approval"
	"mcpbox/internal/daemon"
	"mcpbox/internal/integrity"
)

const approvalsHelp = `USAGE
  mcpbox approvals [--json] [--all | --config FILE | --state-dir DIR]
  mcpbox approvals revoke ID [--all | --config FILE | --state-dir DIR]
  mcpbox approve ID [--session | --always] [--all | --config FILE | --state-dir DIR]
  mcpbox deny ID [--all | --config FILE | --state-dir DIR]

approvals lists the calls (and changed tool definitions) waiting for a
human decision in the gateways running on that state dir (with no flag:
the current project's; --all, or in no project: all), and the remembered decisions; every argument of a waiting call is listed below
the table (keys quoted, values over 200 characters folded; --json prints
them whole, redacted). approve lets a waiting call run: once (the
default), for the rest of its client session (--session), or always for
that client, server and tool (--always, kept across restarts until
revoked; listed and revoked while no gateway runs too). deny refuses it. A call nobody decides is denied after
approvals.timeout (default 50s). A call whose client gave up on it (cancelled
it, ended its session) or whose gateway stopped is withdrawn: approving it
then fails, since nothing would be left to run it for.
`

// adminFlags are the flags that find a running gateway's state dir.
type adminFlags struct {
	config, stateDir *string
	all              *bool
}

func registerAdminFlags(fs *flag.FlagSet) adminFlags {
	return adminFlags{
		config:   fs.String("config", "", "the gateway's config `FILE` (its state_dir)"),
		stateDir: fs.String("state-dir", "", "the gateway's state `DIR`"),
		all:      fs.Bool("all", false, "every running mcpbox serve of this user"),
	}
}

// registerOneDirFlags is registerAdminFlags for a command that works on
// one state dir (logs, token rotate, ui): --all is accepted only to say
// why it is refused, and the help does not list it.
func registerOneDirFlags(fs *flag.FlagSet) adminFlags {
	af := registerAdminFlags(fs)
	fs.Lookup("all").Usage = hiddenFlag
	return af
}

// dir is the state dir the flags name (daemon.AdminDir).
func (f adminFlags) dir(e *env, cmd string) (string, bool) {
	dir, err := daemon.AdminDir(*f.config, *f.stateDir, *f.all)
	if err != nil {
		e.errorf("%s: %v", cmd, err)
	}
	return dir, err == nil
}

// client is the admin client of a listing (ps) or of a command on one
// sandbox ID: where instances of several configs run for the directory,
// all of them answer (admin.Listing); the ID picks its instance.
func (f adminFlags) client(e *env, cmd string) (admin.Client, bool) {
	c, err := admin.Listing(daemon.AdminDir(*f.config, *f.stateDir, *f.all))
	if err != nil {
		e.errorf("%s: %v", cmd, err)
	}
	return c, err == nil
}

func (e *env) approvals(args []string) int {
	fs := e.newFlagSet("approvals", approvalsHelp)
	af := registerAdminFlags(fs)
	asJSON := fs.Bool("json", false, "one JSON object per line")
	revoke := len(args) > 0 && args[0] == "revoke"
	if revoke {
		args = args[1:]
	}
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	c, ok := af.client(e, "approvals")
	if !ok {
		return exitUsage
	}
	if revoke {
		if fs.NArg() != 1 {
			e.errorf("approvals revoke: want one ID")
			return exitUsage
		}
		if err := daemon.Revoke(c, fs.Arg(0)); err != nil {
			e.errorf("approvals revoke: %v", err)
			return 1
		}
		fmt.Fprintf(e.stdout, "revoked %s\n", fs.Arg(0))
		return 0
	}
	if fs.NArg() != 0 {
		e.errorf("approvals: unexpected arguments %q", fs.Args())
		return exitUsage
	}
	r, err := daemon.Approvals(c, e.stderr)
	if err != nil {
		e.errorf("approvals: %v", err)
		return 1
	}
	admin.WriteApprovals(e.stdout, r, *asJSON)
	return 0
}

// decide is `mcpbox approve` (allow true) and `mcpbox deny`.
func (e *env) decide(args []string, allow bool) int {
	name := "deny"
	if allow {
		name = "approve"
	}
	fs := e.newFlagSet(name, approvalsHelp)
	af := registerAdminFlags(fs)
	session := fs.Bool("session", false, "approve: also the same call for the rest of the client session")
	always := fs.Bool("always", false, "approve: always, for this client, server and tool (until revoked)")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if fs.NArg() != 1 {
		e.errorf("%s: want one approval ID (see mcpbox approvals)", name)
		return exitUsage
	}
	scope := approval.ScopeOnce
	switch {
	case *session && *always, !allow && (*session || *always):
		e.errorf("%s: --session and --always are for approve, one at a time", name)
		return exitUsage
	case *session:
		scope = approval.ScopeSession
	case *always:
		scope = approval.ScopeAlways
	}
	c, ok := af.client(e, name)
	if !ok {
		return exitUsage
	}
	req, err := c.Decide(fs.Arg(0), allow, scope)
	if err != nil {
		if strings.HasSuffix(err.Error(), approval.ErrUnknown.Error()) && c.StateDir != admin.AllStateDirs { // the instance's error, as text
			// The one the person read may wait in another project.
			err = fmt.Errorf("%w (mcpbox approvals --all lists every project's; %s ID --all decides there)", err, name)
		}
		e.errorf("%s: %v", name, err)
		return 1
	}
	fmt.Fprintln(e.stdout, admin.Decided(req, allow, scope))
	return 0
}

const trustHelp = `USAGE
  mcpbox trust SERVER[/NAME] | TOOL [--dry-run] [--all | --config FILE | --state-dir DIR]

Shows, as a diff against the lock file, the tool (prompt, template)
definitions of SERVER that changed or appeared since they were pinned and
are hidden from clients for that reason, then pins them in the lock file so
that clients see them again (they get list_changed). NAME is a tool name,
prompt:NAME or template:URI; without it every pending change of SERVER is
trusted. A tool may also be named as clients see it, with its server's
prefix (github__create_issue). --dry-run only shows the diff.
`

func (e *env) trust(args []string) int {
	fs := e.newFlagSet("trust", trustHelp)
	af := registerAdminFlags(fs)
	dry := fs.Bool("dry-run", false, "show the pending changes, trust nothing")
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if fs.NArg() != 1 {
		e.errorf("trust: want SERVER, SERVER/NAME or a tool's client-visible name")
		return exitUsage
	}
	server, key, _ := strings.Cut(fs.Arg(0), "/")
	dir, ok := af.dir(e, "trust")
	if !ok {
		return exitUsage
	}
	// Show first, then trust exactly what was shown: a definition the
	// server changes in between is refused, not trusted unseen.
	changes, err := admin.Client{StateDir: dir}.Pins(server)
	if errors.Is(err, admin.ErrNoInstance) {
		// A change waits in a running serve; with none (a stdio client's
		// ends with it), pin shows and pins what the servers offer now,
		// of the config named (pin does not look for the project's).
		cfg := *af.config
		if wd, werr := os.Getwd(); cfg == "" && werr == nil {
			cfg = admin.ProjectConfig(wd)
		}
		if cfg != "" {
			cfg = " --config " + cfg
		}
		err = fmt.Errorf("%w (with none running, mcpbox pin%s shows and pins what the servers offer now; mcpbox update SERVER%[2]s for a moved image or package)", err, cfg)
	}
	if err != nil {
		e.errorf("trust: %v", err)
		return 1
	}
	var hashes []string
	for _, c := range changes {
		if k, n := integrity.ParseTrustKey(key); key != "" && (c.Kind != k || c.Key != n) {
			continue
		}
		if c.Server != server {
			// The gateway resolved a tool's client-visible name: its
			// changes are that tool's, and name the server.
			server, key = c.Server, integrity.TrustKey(c.Kind, c.Key)
		}
		hashes = append(hashes, c.NewHash)
		admin.WriteChange(e.stdout, c)
	}
	if len(hashes) == 0 {
		pinArgs := "SERVER" // a bare argument may be a tool's client-visible name
		if key != "" {
			pinArgs = server
		}
		if cfg := admin.ServedConfig(dir); cfg != "" {
			pinArgs = "--config " + cfg + " " + pinArgs // pin reads no project's config
		}
		fmt.Fprintf(e.stdout, "%s: nothing pending (a change waits in the serve whose session saw it; mcpbox pin --check %s compares what the server offers now with the lock, mcpbox pin %[2]s records it)\n", fs.Arg(0), pinArgs)
		return 0
	}
	if *dry {
		return 0
	}
	trusted, err := admin.Client{StateDir: dir}.Trust(server, key, hashes)
	if err != nil {
		e.errorf("trust: %v", err)
		return 1
	}
	admin.WriteTrusted(e.stdout, trusted)
	return 0
}
