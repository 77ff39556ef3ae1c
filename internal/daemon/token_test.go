package daemon

import (
	"strings"
	"testing"

	"mcpbox/internal/config"
)

func TestCheckNoAuth(t *testing.T) {
	plain := &config.Config{}
	withClients := &config.Config{Clients: []config.Client{{Name: "a"}}}
	tests := []struct {
		c    *config.Config
		addr string
		want string // "" for allowed
	}{
		{plain, "127.0.0.1:8765", ""},
		{plain, "[::1]:0", ""},
		{plain, "localhost:0", ""},
		{plain, "", ""},
		{plain, "0.0.0.0:8765", "only a loopback address"},
		{plain, ":8765", "only a loopback address"},
		{plain, "192.168.1.5:8765", "only a loopback address"},
		{plain, "localhost.evil.example:80", "only a loopback address"},
		{plain, "8080", "want HOST:PORT; for this host only: --http 127.0.0.1:8080"},
		{plain, "localhost", "want HOST:PORT, e.g. 127.0.0.1:8080"},
		{withClients, "127.0.0.1:8765", "has clients"},
		{&config.Config{Listen: config.Listen{HTTP: config.HTTP{OAuth: &config.HTTPOAuth{}}}}, "127.0.0.1:8765", "listen.http.oauth"},
	}
	for _, tt := range tests {
		err := checkNoAuth(tt.c, tt.addr)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("checkNoAuth(clients %d, %q) = %v, want %q", len(tt.c.Clients), tt.addr, err, tt.want)
		}
	}
}
