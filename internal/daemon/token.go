package daemon

import (
	"fmt"

	"mcpbox/internal/bearer"
	"mcpbox/internal/gateway"
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
