package cli

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"mcpbox/internal/admin"
	"mcpbox/internal/daemon"
	"mcpbox/internal/specconv"
	"mcpbox/internal/workspace"
)

const secretsHelp = `USAGE
  mcpbox secrets [--json] FILE
  mcpbox secrets [--json] --config FILE
  mcpbox secrets rotate NAME|SERVER/NAME [--config FILE | --state-dir DIR]

Lists the secret references of every server in FILE (default: the
mcpbox.yaml of the current directory) and where each goes
(variable, /run/secrets file, or the HTTP header of a remote server;
AS "url": a key written in a remote server's url): never a value. A
secret added at the egress proxy (inject) shows AS "proxy" and the
HOSTS the proxy adds it for; the sandbox holds only a placeholder. A kubernetes:SECRET/KEY reference shows its namespace.

rotate asks the gateways running on that config's state dir (with
neither flag: the current project's) to renew the sandboxes of every
server with the secret: the reference is resolved again and new
sandboxes take over; calls in flight finish on the old ones.
`

func (e *env) secrets(args []string) int {
	fs := e.newFlagSet("secrets", secretsHelp)
	cfgPath := fs.String("config", "", "the config `FILE` whose secrets to list")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	stateFlag := fs.String("state-dir", "", "rotate: the gateway's state `DIR` (default: the config's)")
	rotate := len(args) > 0 && args[0] == "rotate"
	if rotate {
		args = args[1:]
	}
	if code, stop := e.parse(fs, reorder(fs, args)); stop {
		return code
	}
	if rotate {
		return e.rotate(fs.Args(), *cfgPath, *stateFlag)
	}
	cfg, ok := e.configFile("secrets", "one config FILE, or rotate NAME", fs.Args(), *cfgPath)
	if !ok {
		return exitUsage
	}
	*cfgPath = cfg
	c, err := daemon.LoadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return 1
	}
	rows := daemon.SecretList(c, *cfgPath)
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, r := range rows {
			_ = enc.Encode(r)
		}
		return 0
	}
	// A project's config is not trusted: a reference holding an escape
	// sequence must not drive the terminal it is listed on.
	tw := tabwriter.NewWriter(workspace.TermSafe(e.stdout), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tNAME\tFROM\tAS\tTTL\tHOSTS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cmp.Or(r.Server, "-"), r.Name, r.Source(), r.As, r.TTL, strings.Join(r.Hosts, ","))
	}
	tw.Flush()
	return 0
}

// rotate is `mcpbox secrets rotate NAME`.
func (e *env) rotate(args []string, cfgPath, stateFlag string) int {
	if len(args) != 1 {
		e.errorf("secrets rotate: want one secret NAME or SERVER/NAME")
		return exitUsage
	}
	dir := stateFlag
	if dir == "" && cfgPath == "" { // the project's, as the admin commands find it
		wd, err := os.Getwd()
		if err == nil {
			dir, err = daemon.FindStateDir(wd, nil)
		}
		if err != nil {
			e.errorf("secrets rotate: %v", err)
			return exitUsage
		}
	}
	if dir == "" {
		c, err := daemon.LoadConfig(cfgPath)
		if err != nil {
			fmt.Fprintln(e.stderr, err)
			return 1
		}
		if dir, err = specconv.StateDir(c, cfgPath, filepath.Dir(cfgPath), ""); err != nil {
			e.errorf("secrets rotate: %v", err)
			return 1
		}
	}
	r, err := admin.Client{StateDir: dir}.Rotate(args[0])
	if err != nil {
		e.errorf("secrets rotate: %v", err)
		return 1
	}
	fmt.Fprintf(e.stdout, "renewed %d sandbox(es) of %s\n", r.Instances, strings.Join(r.Servers, ", "))
	return 0
}

// configFile is the config a command takes as FILE (policy check,
// secrets) or as --config FILE (flag), as the admin commands do, not
// both; with neither, the mcpbox.yaml in the working dir. A usage error
// is printed (naming what the command wants), and ok is false.
func (e *env) configFile(cmd, want string, args []string, flag string) (path string, ok bool) {
	switch {
	case len(args) > 1:
		e.errorf("%s: unexpected arguments %q (want %s)", cmd, args, want)
	case len(args) == 1 && flag != "":
		e.errorf("%s: config given twice (%s and --config %s)", cmd, args[0], flag)
	case len(args) == 1:
		return args[0], true
	case flag != "":
		return flag, true
	default:
		if wd, err := os.Getwd(); err == nil {
			if p := admin.ProjectConfig(wd); p != "" {
				return p, true
			}
		}
		e.errorf("%s: want a config FILE (mcpbox %[1]s FILE), or run it beside an mcpbox.yaml", cmd)
	}
	return "", false
}

// reorder puts flags before positional arguments, so that
// "rotate NAME --config FILE" parses: a flag of fs that takes a value
// (not a boolean) keeps the argument after it.
func reorder(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			rest = append(rest, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && a != "-":
			flags = append(flags, a)
			if !strings.Contains(a, "=") && i+1 < len(args) && takesValue(fs, strings.TrimLeft(a, "-")) {
				flags = append(flags, args[i+1])
				i++
			}
		default:
			rest = append(rest, a)
		}
	}
	return append(flags, rest...)
}

// takesValue reports whether fs has a flag name that is not a boolean.
func takesValue(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}
