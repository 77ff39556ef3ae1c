package daemon

import (
	"testing"

	"mcpbox/internal/config"
)

// TestHTTPOptionsRefuseExposedBind: a non-loopback address needs TLS and
// client tokens.
func TestHTTPOptionsRefuseExposedBind(t *testing.T) {
	t.Setenv("MCPBOX_TEST_CLIENT_TOKEN", "client-token-0123456789")
	clients := []config.Client{{Name: "a", Token: config.Token{From: "env:MCPBOX_TEST_CLIENT_TOKEN"}}}
	tests := []struct {
		name string
		c    config.Config
		addr string
		ok   bool
	}{
		{"loopback", config.Config{}, "127.0.0.1:8765", true},
		{"all interfaces without tls or tokens", config.Config{}, "0.0.0.0:8765", false},
		{"tokens without tls", config.Config{Clients: clients}, "0.0.0.0:8765", false},
		{"tls without tokens", config.Config{Listen: config.Listen{HTTP: config.HTTP{TLS: config.TLS{Cert: "c.pem", Key: "k.pem"}}}}, "0.0.0.0:8765", false},
		{"tls and tokens", config.Config{Clients: clients, Listen: config.Listen{HTTP: config.HTTP{TLS: config.TLS{Cert: "c.pem", Key: "k.pem"}}}}, "0.0.0.0:8765", true},
	}
	for _, tt := range tests {
		_, _, _, err := httpOptions(&tt.c, t.TempDir(), tt.addr)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}
