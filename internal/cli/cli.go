// Package cli implements the mcpbox command line: flag parsing, help
// texts, output and exit codes, and the glue from flags and config files
// to internal/daemon (serve, run, pin), internal/admin's client (the
// admin commands) and internal/sandbox (exec). It holds no policy and no
// mechanism of its own (docs/architecture.md; internal/conventions keeps
// it that way).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"mcpbox/internal/config"

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

ADMIN (run in a project they find its running mcpbox serve instances;
--all: every instance of this user; --config FILE or --state-dir DIR: that one)
  logs       the audit log: filters, --follow, --json; logs verify
  approvals  calls waiting for a human decision; approve ID, deny ID
  pin        record the servers' tool definitions in mcpbox.lock
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

// exitUsage is returned for bad flags and arguments.
const exitUsage = 2

// Main runs the command line args and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	env := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	switch args[0] {
	case "exec":
		return env.exec(args[1:])
	case "doctor":
		return env.doctor(args[1:])
	case "policy":
		return env.policy(args[1:])
	case "secrets":
		return env.secrets(args[1:])
	case "run":
		return env.run(args[1:])
	case "import":
		return env.importConfig(args[1:])
	case "__builtin":
		return env.builtinMain(args[1:])
	case "__group":
		return env.groupMain(args[1:])
	case "agent": // in a Kubernetes pod; see internal/podagent
		return podagent.Main(args[1:], stderr)
	case "egress-proxy": // in the egress proxy's pods (Kubernetes backend)
		return egressproxy.Main(args[1:], stdout, stderr)
	case "serve":
		return env.serve(args[1:])
	case "kube":
		return env.kubeCmd(args[1:])
	case "version", "--version":
		fmt.Fprintln(stdout, "mcpbox", Version)
		return 0
	case "help", "-h", "--help":
		if len(args) > 1 && slices.Contains(commands, args[1]) { // mcpbox help serve
			return Main([]string{args[1], "--help"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	case "logs":
		return env.logs(args[1:])
	case "approvals":
		return env.approvals(args[1:])
	case "approve":
		return env.decide(args[1:], true)
	case "deny":
		return env.decide(args[1:], false)
	case "pin":
		return env.pin(args[1:])
	case "trust":
		return env.trust(args[1:])
	case "update":
		return env.update(args[1:])
	case "ps":
		return env.ps(args[1:])
	case "stop", "pause", "resume":
		return env.control(args[0], args[1:])
	case "snapshot":
		return env.snapshotCmd(args[1:])
	case "diff":
		return env.diff(args[1:])
	case "token":
		return env.token(args[1:])
	case "ui":
		return env.ui(args[1:])
	case "login", "logout":
		return env.login(args[0], args[1:])
	default:
		// Not the whole usage: it would push the one line that matters
		// off the screen.
		msg := fmt.Sprintf("mcpbox: unknown command %q", args[0])
		if best := config.Closest(args[0], commands); best != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", best)
		}
		fmt.Fprintf(stderr, "%s\nRun 'mcpbox --help' for the commands.\n", msg)
		return exitUsage
	}
}

// commands are the names Main dispatches, for "did you mean" and help.
var commands = []string{"exec", "run", "serve", "doctor", "policy", "secrets", "kube", "import",
	"version", "logs", "approvals", "approve", "deny", "pin", "trust", "update", "ps", "stop",
	"pause", "resume", "snapshot", "diff", "token", "ui", "login", "logout"}

// env carries the standard streams to the subcommands.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (e *env) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "mcpbox: "+format+"\n", args...)
}

// newFlagSet makes a flag set whose -h prints help to stdout and exits 0,
// and whose errors go to stderr.
func (e *env) newFlagSet(name, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fmt.Fprintln(fs.Output(), "\nFLAGS")
		fs.VisitAll(func(f *flag.Flag) {
			fmt.Fprintf(fs.Output(), "  %s\n      %s\n", flagSynopsis(f), strings.ReplaceAll(flagText(f), "\n", "\n      "))
		})
	}
	return fs
}

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
	if _, rest, ok := strings.Cut(msg, " for flag -"); ok {
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
