package config

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
)

// TestURLKeys: the keys in a remote server's url, in its path (per-user
// URLs), its query and its user info, are found; names, slugs, dates and
// versions are not.
func TestURLKeys(t *testing.T) {
	cfg := base64.StdEncoding.EncodeToString([]byte(`{"apiKey":"inner-key-0123456789","region":"eu"}`))
	shaped := func(s string) bool { return strings.HasPrefix(s, "ghp_") }
	for _, tt := range []struct {
		url  string
		want []string
	}{
		{"https://mcp.zapier.com/api/mcp/s/NjM0ZjUxYjAtOTk4Zi00Y2Q1LWI3ZTEtMzA1/mcp", []string{"NjM0ZjUxYjAtOTk4Zi00Y2Q1LWI3ZTEtMzA1"}},
		{"https://mcp.pipedream.net/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0/github", []string{"0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"}},
		{"https://host/k/0123456789abcdef0123456789abcdef/mcp", []string{"0123456789abcdef0123456789abcdef"}},
		{"https://host/t/ghp_short/mcp", []string{"ghp_short"}},
		{"https://mcp.zapier.com/api/mcp/s/k3j4h5g6f7d8s9a0q1w2e3r4t5y6u7i8o9p0/mcp", []string{"k3j4h5g6f7d8s9a0q1w2e3r4t5y6u7i8o9p0"}},
		{"https://host/s/abc%2BDEF123ghi456JKL789/mcp", []string{"abc+DEF123ghi456JKL789", "abc%2BDEF123ghi456JKL789"}},
		{"https://user:hunter2hunter2@host/mcp", []string{"hunter2hunter2"}},
		{"https://host/mcp?api_key=abc123def456&profile=work", []string{"abc123def456"}},
		{"https://host/mcp?x=Bearer%20abcdefghijklmnopqrstuvwxyz", []string{"Bearer abcdefghijklmnopqrstuvwxyz", "Bearer%20abcdefghijklmnopqrstuvwxyz"}},
		{"https://host/mcp?config=" + cfg, []string{cfg, "inner-key-0123456789"}},
		{"https://host/mcp?config=%7B%22token%22%3A%22tok-0123456789%22%7D", []string{"tok-0123456789"}},
		{"https://server.smithery.ai/@acme/search/mcp?profile=work", nil},
		{"https://api.githubcopilot.com/mcp/", nil},
		{"https://mcp.example.com/v1/2025-06-18/modelcontextprotocol-server-everything/mcp", nil},
		{"https://mcp.example.com/sse?transport=streamable-http&sessionId=", nil},
		{"::not a url", nil},
	} {
		if got := URLKeys(tt.url, shaped); !slices.Equal(got, tt.want) {
			t.Errorf("URLKeys(%s) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

func TestRandomToken(t *testing.T) {
	for s, want := range map[string]bool{
		"NjM0ZjUxYjAtOTk4Zi00Y2Q1LWI3ZTEtMzA1":   true,
		"0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0":   true,
		"0123456789ABCDEF0123456789abcdef":       true,
		"aB3dE6gH9jK2mN5pQ8sT1":                  true,
		"aB3dE6gH9jK2mN5pQ8s":                    false, // 19 characters
		"modelcontextprotocol-server-everything": false,
		"server-everything-v2025":                false,
		"2025-06-18":                             false,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ012345":       false, // no lower case
		"abc/DEF123ghi456JKL789":                 false, // a '/'
		"k3j4h5g6f7d8s9a0q1w2e3r4t5y6u7i8o9p0":   true,  // lower case and digits, base36
		"mcpbox_b2q7xk4m9tz3w6ry8n5s1hv":         true,  // base32
		"modelcontextprotocol2025":               false, // one switch
	} {
		if got := RandomToken(s); got != want {
			t.Errorf("RandomToken(%q) = %v, want %v", s, got, want)
		}
	}
}
