// Package cli implements the mcpbox command line: flag parsing, help
// texts, output and exit codes, and the glue from flags and config files
// to internal/daemon (serve, run, pin), internal/admin's client (the
// admin commands) and internal/sandbox (exec). It holds no policy and no
// mechanism of its own (docs/architecture.md; internal/conventions keeps
// it that way).
package cli

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/daemon"

	"mcpbox/internal/kube/egressproxy"
	"mcpbox/internal/podagent"
)

// usage is the top-level help, written like a man page's synopsis.
const usage = `mcpbox — run MCP servers in Linux sandboxes behind a policy gateway

USAGE
  mcpbox <command> [flags] [-- CMD [ARG...]]

COMMANDS
  exec      run any command in a fresh sandbox (stdio passed through,
            exit code propagated)
  run       run one stdio MCP server in a sandbox behind the gateway
            (a drop-in command for a client's mcpServers config)
  serve     the gateway for every server of a config file, over stdio
            and/or Streamable HTTP
  doctor    report which isolation features this host supports
  policy    check a config file: mcpbox policy check FILE
  secrets   list a config's secret references (never values)
  kube      kube rbac: the gateway's Role for backend kind: kubernetes
  import    turn a client's MCP config (Claude, Cursor, VS Code) into an
            mcpbox.yaml that runs every server sandboxed
  version   print the version

ADMIN (in a project they reach its running mcpbox serve instances;
--all: every instance of yours; --config FILE or --state-dir DIR: that one's)
  logs       the audit log: filters, --follow, --json; logs verify
  approvals  calls waiting for a human decision (mcpbox approve ID, mcpbox deny ID)
  pin        record the servers' tool definitions in the config's lock file
  trust      show and accept changed tool definitions: trust SERVER[/TOOL]
  update     re-resolve a server's pinned image or package, show what changes, pin it
  ps         the gateway's sandboxes; stop ID, pause ID, resume ID
  snapshot   write a sandbox's workspace to an archive: snapshot ID
  diff       the changes a sandbox made to its overlaid input: diff ID
  token      token rotate: a new bearer token for serve's HTTP endpoint
             when the config has no clients
  ui         the dashboard in a browser: ui [--print-url]
  login      authorize a remote server (OAuth): login SERVER; logout SERVER

Run 'mcpbox <command> --help' for a command's flags.

SANDBOX
  Every sandbox gets new user, mount, pid, net, ipc, uts and cgroup
  namespaces; a read-only root of /usr, /lib*, /bin, /sbin and a curated
  /etc; /workspace/input (ro), /workspace/output (rw), /tmp (tmpfs);
  no network; a non-root uid with no capabilities, no_new_privs, Landlock
  and seccomp; cgroup limits. Nothing of $HOME, the host's processes or
  environment is visible. See docs/threat-model.md.

EXIT STATUS
  The command's own exit status; 128+N when it was killed by signal N;
  124 when --timeout expired; 125 when the sandbox could not be set up;
  126 when the command could not be executed; 127 when it was not found;
  2 for usage errors.
`

// Version is set at build time with -ldflags "-X mcpbox/internal/cli.Version=...".
var Version = "dev"

// version is Version, or "dev+REV" for a build that did not set it
// (daemon.StampedVersion): what mcpbox version prints and clients see
// in serverInfo.
var version = sync.OnceValue(func() string { return daemon.StampedVersion(Version) })

// exitUsage is returned for bad flags and arguments.
const exitUsage = 2

// exitFor is the exit status of a command that failed with err: a config
// it cannot use (a *daemon.ConfigError) is a usage error.
func exitFor(err error) int {
	return map[bool]int{true: exitUsage, false: 1}[errors.As(err, new(*daemon.ConfigError))]
}

// Main runs the command line args and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	env := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 && listed(args[1]) { // mcpbox help serve
			return Main([]string{args[1], "--help"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(env, args[1:])
		}
	}
	// Not the whole usage: it would push the one line that matters off
	// the screen.
	msg := fmt.Sprintf("mcpbox: unknown command %q", args[0])
	var names []string
	for _, c := range commands {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	if best := cmp.Or(otherNames[args[0]], config.Closest(args[0], names)); best != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", best)
	}
	fmt.Fprintf(stderr, "%s\nRun 'mcpbox --help' for the commands.\n", msg)
	return exitUsage
}

// otherNames are what other tools call a command.
var otherNames = map[string]string{"status": "ps", "list": "ps", "ls": "ps", "-v": "version", "-version": "version", "start": "serve", "audit": "logs"}

// command is one command Main runs.
type command struct {
	name string
	run  func(e *env, args []string) int
	// hidden: not offered by "did you mean" or help (the sandbox's and
	// the pods' own entry points).
	hidden bool
}

// commands are the commands Main runs besides help: the one list of
// them, for dispatch, "did you mean" and "help CMD".
var commands = []command{
	{name: "version", run: (*env).version},
	{name: "--version", run: (*env).version, hidden: true},
	{name: "exec", run: (*env).exec},
	{name: "run", run: (*env).run},
	{name: "serve", run: (*env).serve},
	{name: "doctor", run: (*env).doctor},
	{name: "policy", run: (*env).policy},
	{name: "secrets", run: (*env).secrets},
	{name: "kube", run: (*env).kubeCmd},
	{name: "import", run: (*env).importConfig},
	{name: "logs", run: (*env).logs},
	{name: "approvals", run: (*env).approvals},
	{name: "approve", run: func(e *env, args []string) int { return e.decide(args, true) }},
	{name: "deny", run: func(e *env, args []string) int { return e.decide(args, false) }},
	{name: "pin", run: (*env).pin},
	{name: "trust", run: (*env).trust},
	{name: "update", run: (*env).update},
	{name: "ps", run: (*env).ps},
	{name: "stop", run: func(e *env, args []string) int { return e.control("stop", args) }},
	{name: "pause", run: func(e *env, args []string) int { return e.control("pause", args) }},
	{name: "resume", run: func(e *env, args []string) int { return e.control("resume", args) }},
	{name: "snapshot", run: (*env).snapshotCmd},
	{name: "diff", run: (*env).diff},
	{name: "token", run: (*env).token},
	{name: "ui", run: (*env).ui},
	{name: "login", run: func(e *env, args []string) int { return e.login("login", args) }},
	{name: "logout", run: func(e *env, args []string) int { return e.login("logout", args) }},
	{name: "__builtin", run: (*env).builtinMain, hidden: true},
	{name: "__group", run: (*env).groupMain, hidden: true},
	// In a Kubernetes pod (internal/podagent) and in the egress proxy's
	// pods (Kubernetes backend).
	{name: "agent", run: func(e *env, args []string) int { return podagent.Main(args, e.stderr) }, hidden: true},
	{name: "egress-proxy", run: func(e *env, args []string) int { return egressproxy.Main(args, e.stdout, e.stderr) }, hidden: true},
}

func (e *env) version([]string) int {
	fmt.Fprintln(e.stdout, "mcpbox", version())
	return 0
}

// listed reports whether name is a command help offers.
func listed(name string) bool {
	return slices.ContainsFunc(commands, func(c command) bool { return c.name == name && !c.hidden })
}

// env carries the standard streams to the subcommands.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (e *env) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "mcpbox: %s\n", config.Printable(fmt.Sprintf(format, args...)))
}

// newFlagSet makes a flag set whose -h prints help to stdout and exits 0,
// and whose errors go to stderr.
func (e *env) newFlagSet(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		heading := "\nFLAGS\n" // only above a flag
		fs.VisitAll(func(f *flag.Flag) {
			if f.Usage != hiddenFlag {
				fmt.Fprintf(fs.Output(), "%s  %s\n      %s\n", heading, flagSynopsis(f), strings.ReplaceAll(flagText(f), "\n", "\n      "))
				heading = ""
			}
		})
	}
	return fs
}

// hiddenFlag is the usage of a flag the help does not list.
const hiddenFlag = "(hidden)"

// flagSynopsis is how the help shows a flag: "-o FILE" for a one-letter
// flag, as the usage lines write it, "--config FILE" otherwise, and a
// boolean without a value.
func flagSynopsis(f *flag.Flag) string {
	dash := "--"
	if len(f.Name) == 1 {
		dash = "-"
	}
	if name, _ := flag.UnquoteUsage(f); name != "" {
		return dash + f.Name + " " + name
	}
	return dash + f.Name
}

func flagText(f *flag.Flag) string {
	_, text := flag.UnquoteUsage(f)
	return text
}

// parse parses args; it returns (code, true) when the caller should stop.
func (e *env) parse(fs *flag.FlagSet, args []string) (int, bool) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return 0, true
		}
	}
	// The flag package would print the error and then the whole help,
	// which pushes the error off the screen: the error, a hint, a pointer.
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		e.errorf("%s: %s\nRun 'mcpbox %s --help' for its flags.", fs.Name(), flagError(fs, err), fs.Name())
		return exitUsage, true
	}
	return 0, false
}

// flagError is a flag package error as a user wants it: an unknown flag
// with the one meant, a bad duration with the form wanted.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		msg = "flag provided but not defined: --" + name
		if best := config.Closest(strings.TrimPrefix(name, "-"), names); best != "" {
			msg += fmt.Sprintf(" (did you mean --%s?)", best)
		}
		return msg
	}
	// The flag package names flags with one dash; the docs use two. A
	// flag that takes a value but may stand alone (--allow-degraded) is
	// a bool to it, whose "invalid boolean value" would mislead.
	msg = strings.Replace(msg, "flag needs an argument: -", "flag needs an argument: --", 1)
	if rest, ok := strings.CutPrefix(msg, "invalid boolean value "); ok {
		val, name, _ := strings.Cut(rest, " for -")
		name, why, _ := strings.Cut(name, ": ")
		msg = fmt.Sprintf("invalid value %s for flag -%s: %s", val, name, why)
		if f := fs.Lookup(name); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, ok := g.Get().(bool); ok {
					msg = fmt.Sprintf("invalid boolean value %s for flag -%s: %s", val, name, why)
				}
			}
		}
	}
	msg = strings.Replace(msg, " for flag -", " for flag --", 1)
	if _, rest, ok := strings.Cut(msg, " for flag --"); ok {
		name, _, _ := strings.Cut(rest, ":")
		if f := fs.Lookup(name); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, ok := g.Get().(time.Duration); ok {
					msg += " (want a duration such as 30s, 10m or 1h)"
				}
			}
		}
	}
	return msg
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }
