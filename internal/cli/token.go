package cli

import (
	"fmt"
	"os"

	"mcpbox/internal/bearer"
	"mcpbox/internal/config"
	"mcpbox/internal/daemon"
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

Without --config or --state-dir: the state dir of the project the
current directory is in, found as mcpbox logs finds it (from the current
directory upwards, the one of a running serve first; where serves of
two configs run there, it names them and rotates nothing); where no
serve has run yet, the state dir mcpbox serve with no flags would use
here.
A config with clients has its tokens in the config (clients[].token):
they are not rotated here, and token rotate refuses, changing nothing,
where the serve running on the state dir serves HTTP without the token
file (clients, --no-auth), or, with none running, in a project whose
config has clients.
`

// printTokenNote tells where the token of a config without clients is;
// the token itself is not printed (stderr may be a service's log).
func (e *env) printTokenNote(dir string) {
	e.errorf("every request needs \"Authorization: Bearer TOKEN\" with the token in %s (kept across restarts; mcpbox token rotate makes a new one; --no-auth serves without)", bearer.Token.Path(dir))
}

func (e *env) token(args []string) int {
	fs := e.newFlagSet("token rotate", tokenHelp)
	af := registerOneDirFlags(fs)
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
	tok, note, err := daemon.RotateToken(dir)
	if err != nil {
		e.errorf("token rotate: %v", err)
		return 1
	}
	fmt.Fprintln(e.stdout, tok)
	e.errorf("%s", note)
	return 0
}

// tokenStateDir is the state dir the flags name, or without flags the
// current project's, as the other admin commands find it (so the token
// rotated is the one the serve mcpbox ps shows here wants); where no
// serve has run, the embedded default's, as serve would use it here.
func (e *env) tokenStateDir(af adminFlags) (string, bool) {
	if *af.all {
		e.errorf("token rotate: --all: a token is one state dir's; run it in the project or pass --config or --state-dir")
		return "", false
	}
	if *af.config != "" {
		c, err := daemon.LoadConfig(*af.config)
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
	cwd, err := os.Getwd()
	if err != nil {
		e.errorf("token rotate: %v", err)
		return "", false
	}
	c, err := config.Load("(embedded default)", defaultConfig)
	if err == nil {
		var dir string
		if dir, err = daemon.TokenStateDir(cwd, c); err == nil {
			return dir, true
		}
	}
	e.errorf("token rotate: %v", err)
	return "", false
}
