package cli

import (
	"fmt"
	"net"
	"os"

	"mcpbox/internal/bearer"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/redact"
	"mcpbox/internal/specconv"
)

const tokenHelp = `USAGE
  mcpbox token rotate [--config FILE | --state-dir DIR]

Replaces the bearer token that guards serve's HTTP endpoint when its
config has no clients (the embedded default, or a config without
clients:). The token is kept in the state dir's token file (mode 0600)
and stays the same across restarts until rotated. The new token is
printed on standard output; a running serve on that state dir accepts it
from its next request and refuses the old one, so update the
Authorization header of your client config.

Without --config or --state-dir: the state dir of the embedded default,
as mcpbox serve with no flags would use it in the current directory.
A config with clients has its tokens in the config (clients[].token):
they are not rotated here.
`

// redactTokenName names the local token in redacted output.
const redactTokenName = "client_token_default"

// localToken guards HTTP for a config without clients with the state
// dir's token (see package bearer); it returns that token, or "" when
// serve needs none (no HTTP, clients configured, or --no-auth).
// Preconditions: guard.StateDirOwned(dir).
func (e *env) localToken(hopts *gateway.HTTPOptions, dir, addr string, noAuth bool, book *redact.Book) (string, error) {
	if addr == "" || len(hopts.Clients) > 0 {
		return "", nil
	}
	if noAuth {
		e.errorf("warning: --no-auth: HTTP on %s has no token: any local process or user can call the tools", addr)
		return "", nil
	}
	w, err := bearer.NewWatch(dir)
	if err != nil {
		return "", err
	}
	tok := w.Token()
	if err := book.Add(redactTokenName, []byte(tok)); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	// The token authenticates the local user, as stdio does: the same
	// agent, so HTTP and stdio sessions share sandboxes and workspaces.
	hopts.Clients = []gateway.Client{{Name: gateway.LocalAgent, Token: []byte(tok)}}
	hopts.Refresh = func() ([]gateway.Client, bool, error) {
		tok, changed, err := w.Refresh()
		if changed {
			if err := book.Add(redactTokenName, []byte(tok)); err != nil {
				return nil, false, fmt.Errorf("token: %w", err)
			}
		}
		return []gateway.Client{{Name: gateway.LocalAgent, Token: []byte(tok)}}, changed, err
	}
	return tok, nil
}

// checkNoAuth refuses --no-auth where it cannot apply: with clients,
// whose tokens stay required, and on an address other hosts can reach.
func checkNoAuth(c *config.Config, addr string) error {
	if len(c.Clients) > 0 {
		return fmt.Errorf("--no-auth: the config has clients, whose tokens every request needs; remove one or the other")
	}
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--no-auth: refusing to serve %s without a token: only a loopback address (127.0.0.1, [::1], localhost) may go without", addr)
	}
	return nil
}

// printTokenNote tells where the token of a config without clients is;
// the token itself is not printed (stderr may be a service's log).
func (e *env) printTokenNote(dir string) {
	e.errorf("every request needs \"Authorization: Bearer TOKEN\" with the token in %s (kept across restarts; mcpbox token rotate makes a new one; --no-auth serves without)", bearer.Path(dir))
}

func (e *env) token(args []string) int {
	fs := e.newFlagSet("token rotate", tokenHelp)
	af := registerAdminFlags(fs)
	if len(args) == 0 || args[0] != "rotate" {
		if code, stop := e.parse(fs, args); stop {
			return code // --help
		}
		e.errorf("token: want a subcommand: rotate")
		return exitUsage
	}
	if code, stop := e.parse(fs, args[1:]); stop {
		return code
	}
	if fs.NArg() > 0 {
		e.errorf("token rotate: unexpected arguments %q", fs.Args())
		return exitUsage
	}
	dir, ok := e.tokenStateDir(af)
	if !ok {
		return exitUsage
	}
	if err := guard.StateDirOwned(dir); err != nil {
		e.errorf("token rotate: %v", err)
		return 1
	}
	tok, err := bearer.Rotate(dir)
	if err != nil {
		e.errorf("token rotate: %v", err)
		return 1
	}
	fmt.Fprintln(e.stdout, tok)
	e.errorf("new token in %s: a running serve on %s accepts it from its next request and refuses the old one; update your client config", bearer.Path(dir), dir)
	return 0
}

// tokenStateDir is the state dir the flags name, or without flags the
// embedded default's, as serve would use it here.
func (e *env) tokenStateDir(af adminFlags) (string, bool) {
	if *af.all {
		e.errorf("token rotate: --all: a token is one state dir's; run it in the project or pass --config or --state-dir")
		return "", false
	}
	if *af.config != "" {
		c, err := loadConfig(*af.config)
		if err != nil {
			e.errorf("token rotate: %v", err)
			return "", false
		}
		if len(c.Clients) > 0 {
			e.errorf("token rotate: %s has clients: their tokens come from the config (clients[].token.from), not from a token file", *af.config)
			return "", false
		}
	}
	if *af.config != "" || *af.stateDir != "" {
		return af.dir(e, "token rotate")
	}
	c, err := config.Load("(embedded default)", defaultConfig)
	if err != nil {
		e.errorf("token rotate: %v", err)
		return "", false
	}
	cwd, err := os.Getwd()
	if err != nil {
		e.errorf("token rotate: %v", err)
		return "", false
	}
	dir, err := specconv.StateDir(c, "", cwd, "")
	if err != nil {
		e.errorf("token rotate: %v", err)
		return "", false
	}
	return dir, true
}
