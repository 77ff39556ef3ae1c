package cli

import (
	"context"
	"fmt"
	"strings"

	"mcpbox/internal/daemon"
)

const loginHelp = `USAGE
  mcpbox login SERVER [--no-browser] [--client NAME] [--scope "A B"] [--config FILE] [--state-dir DIR]
  mcpbox login --status [--config FILE] [--state-dir DIR]
  mcpbox logout SERVER [--client NAME] [--config FILE] [--state-dir DIR]

login (servers.SERVER.oauth) prints the authorization URL as the first line
of standard output, opens a browser unless --no-browser, waits up to 5 min
for the redirect on 127.0.0.1 and exits 0 once the tokens are stored,
encrypted in the state dir. logout revokes and deletes them. --status lists
each remote server's login state (expiry, needs login), never a token.
`

func (e *env) login(cmd string, args []string) int {
	fs := e.newFlagSet(cmd, loginHelp)
	cfg := fs.String("config", "", "the config `FILE` (mcpbox.yaml)")
	stateDir := fs.String("state-dir", "", "the gateway's state `DIR`")
	client := fs.String("client", "", "the client identity `NAME` whose token it is")
	noBrowser := fs.Bool("no-browser", false, "only print the authorization URL")
	scope := fs.String("scope", "", "the `SCOPES` to ask for instead of the config's")
	status := fs.Bool("status", false, "list the login state of each remote server")
	if code, stop := e.parse(fs, args); stop {
		return code
	}
	server := fs.Arg(0)
	if code, stop := e.parse(fs, fs.Args()[min(1, fs.NArg()):]); stop { // flags may follow SERVER
		return code
	}
	c, base, err := daemon.LoadConfigOrDefault(*cfg, defaultConfig, cmd)
	if err != nil {
		e.errorf("%s: %v", cmd, err)
		return exitUsage
	}
	if *status && server == "" {
		ls := daemon.LoginSummary(c, *cfg, *stateDir)
		for _, l := range ls {
			fmt.Fprintf(e.stdout, "%s\t%s\n", l.Server, l.State)
		}
		if len(ls) == 0 { // an empty listing would look like a failure
			e.errorf("%s: no remote server (url) of the config has oauth, so none logs in", cmd)
		}
		return 0
	}
	if server == "" || fs.NArg() > 0 {
		e.errorf("%s: want one SERVER", cmd)
		return exitUsage
	}
	ctx, cancel := daemon.SignalContext(context.Background())
	defer cancel()
	o := daemon.LoginOptions{Config: c, ConfigPath: *cfg, Base: base, StateDir: *stateDir, Server: server,
		Client: *client, NoBrowser: *noBrowser, Scopes: strings.Fields(*scope), Stdout: e.stdout, Stderr: e.stderr}
	run := map[string]func(context.Context, daemon.LoginOptions) error{"login": daemon.Login, "logout": daemon.Logout}[cmd]
	if err := run(ctx, o); err != nil {
		e.errorf("%s: %v", cmd, err)
		return exitFor(err)
	}
	return 0
}
