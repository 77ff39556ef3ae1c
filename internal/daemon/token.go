package daemon

import (
	"fmt"
	"strconv"
	"strings"

	"mcpbox/internal/bearer"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/instance"
	"mcpbox/internal/redact"
)

// redactTokenName names the local token in redacted output.
const redactTokenName = "client_token_default"

// localToken guards HTTP for a config without clients with the state
// dir's token (see package bearer); it returns that token, or "" when
// serve needs none (no HTTP, clients configured, or noAuth, which
// warn is called for).
// Preconditions: guard.StateDirOwned(dir).
func localToken(hopts *gateway.HTTPOptions, dir, addr string, noAuth bool, book *redact.Book, warn func(addr string)) (string, error) {
	if addr == "" || len(hopts.Clients) > 0 || (hopts.Verify != nil && !loopbackAddr(addr)) {
		return "", nil // JWT clients only beyond loopback (listen.http.oauth)
	}
	if noAuth {
		if warn != nil {
			warn(addr)
		}
		return "", nil
	}
	w, err := bearer.Token.Watch(dir)
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

// RotateToken makes a new bearer token for the serve instances on
// stateDir (mcpbox token rotate), and says what happens next: whether a
// running serve takes it up from its next request. It refuses, changing
// nothing, where serves run over HTTP and none of them reads the token
// file (their clients' tokens come from the config, or they run with
// --no-auth): a rotation there would revoke nothing.
func RotateToken(stateDir string) (token, note string, err error) {
	if err := guard.StateDirOwned(stateDir); err != nil {
		return "", "", err
	}
	recs, _ := instance.List(stateDir)
	var readers []string // the pids of the serves that read the token file, in the records' order
	var tokenless *instance.Record
	for i, r := range recs {
		switch {
		case r.TokenFile != "":
			readers = append(readers, strconv.Itoa(r.PID))
		case r.URL != "" && tokenless == nil:
			tokenless = &recs[i]
		}
	}
	if readers == nil && tokenless != nil {
		return "", "", fmt.Errorf("the running serve on %s (pid %d, %s) does not use the token file: its HTTP clients' tokens come from its config (clients[].token), or it runs with --no-auth or OAuth; nothing was rotated",
			stateDir, tokenless.PID, tokenless.URL)
	}
	if token, err = bearer.Token.Rotate(stateDir); err != nil {
		return "", "", err
	}
	switch {
	case len(readers) == 1:
		note = fmt.Sprintf("new token in %s: the running serve on %s (pid %s) accepts it from its next request and refuses the old one; update your client config",
			bearer.Token.Path(stateDir), stateDir, readers[0])
	case len(readers) > 1:
		note = fmt.Sprintf("new token in %s: the running serves on %s (pids %s) accept it from their next request and refuse the old one; update your client config",
			bearer.Token.Path(stateDir), stateDir, strings.Join(readers, ", "))
	case len(recs) > 0:
		note = fmt.Sprintf("new token in %s: the running serve on %s (pid %d) serves no HTTP with it now; the next serve with HTTP there accepts it; update your client config",
			bearer.Token.Path(stateDir), stateDir, recs[0].PID)
	default:
		note = fmt.Sprintf("new token in %s: no serve runs on %s now; the next one there accepts it; update your client config",
			bearer.Token.Path(stateDir), stateDir)
	}
	return token, note, nil
}
