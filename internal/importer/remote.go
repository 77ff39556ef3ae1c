package importer

import (
	"encoding/json"
	"net/url"
	"path"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/redact"
)

// This file maps remote servers to OAuth: an entry that reaches a remote
// server without a static Authorization header most likely logs in with
// OAuth (the MCP authorization spec), and mcp-remote wrappers
// (npx mcp-remote URL) are that remote server, which mcpbox reaches
// itself.

// oauthFor turns OAuth on for remote server s unless it sends a
// credential of its own (an Authorization header, a header or URL query
// parameter named like a key: X-Api-Key, ?api_key=, one moved to query,
// or a key in the URL's path: a per-user URL) or is on this machine, and
// returns the comment that says to log in (or how to).
func oauthFor(s *config.Server) []string {
	if len(s.Query) > 0 || pathKey(s.URL) {
		return nil
	}
	if u, err := url.Parse(s.URL); err == nil && config.IsLoopbackHost(u.Hostname()) {
		// A server on this machine (the only one plain HTTP may reach)
		// is most likely a development server with no login.
		return []string{"No OAuth: a server on this machine. If it answers 401, add oauth: {} and run `mcpbox login " + s.Name + " --config FILE`"}
	}
	for _, h := range s.Headers {
		if strings.EqualFold(h.Name, "Authorization") || config.CredentialName(h.Name) {
			return nil
		}
	}
	if u, err := url.Parse(s.URL); err == nil {
		for k := range u.Query() {
			if config.CredentialName(k) {
				return nil
			}
		}
	}
	s.OAuth = &config.ServerOAuth{}
	return []string{"OAuth (the server's own login): run `mcpbox login " + s.Name + " --config FILE` once before serve"}
}

// pathKey reports whether the path of URL raw holds what looks like a
// key (config.URLKeys), as per-user URLs do (https://host/s/KEY/mcp).
func pathKey(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	return len(config.URLKeys((&url.URL{Path: u.Path, RawPath: u.RawPath}).String(), redact.Shaped)) > 0
}

// mcpRemote returns the remote entry an mcp-remote wrapper stands for:
// `npx [-y] mcp-remote[@VERSION] URL [--header "NAME: VALUE"]...` or
// `mcp-remote URL ...`.
func mcpRemote(ent *mcpEntry) (*mcpEntry, bool) {
	args := ent.Args
	switch path.Base(strings.ReplaceAll(ent.Command, `\`, "/")) {
	case "npx", "npx.cmd":
		for len(args) > 0 && strings.HasPrefix(args[0], "-") {
			args = args[1:] // -y, --yes
		}
		if len(args) == 0 || (args[0] != "mcp-remote" && !strings.HasPrefix(args[0], "mcp-remote@")) {
			return nil, false
		}
		args = args[1:]
	case "mcp-remote":
	default:
		return nil, false
	}
	if len(args) == 0 || !strings.Contains(args[0], "://") {
		return nil, false
	}
	// mcp-remote's default transport, http-first, falls back to HTTP+SSE
	// where Streamable HTTP fails: mcpbox's auto.
	r := &mcpEntry{Type: "auto", URL: args[0]}
	headers := map[string]string{}
	for i := 1; i < len(args); i++ {
		var h, transport string
		switch {
		case args[i] == "--header" && i+1 < len(args):
			h, i = args[i+1], i+1
		case strings.HasPrefix(args[i], "--header="):
			h = strings.TrimPrefix(args[i], "--header=")
		case args[i] == "--transport" && i+1 < len(args):
			transport, i = args[i+1], i+1
		case strings.HasPrefix(args[i], "--transport="):
			transport = strings.TrimPrefix(args[i], "--transport=")
		default:
			continue // --allow-http, ...: mcpbox chooses itself
		}
		switch transport {
		case "http-only":
			r.Type = "http"
		case "sse-only":
			r.Type = "sse"
		}
		if h == "" {
			continue
		}
		if name, val, ok := strings.Cut(h, ":"); ok && strings.TrimSpace(name) != "" {
			headers[strings.TrimSpace(name)] = strings.TrimSpace(val)
		}
	}
	if len(headers) > 0 {
		r.Headers, _ = json.Marshal(headers)
	}
	return r, true
}
