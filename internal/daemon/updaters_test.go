package daemon

import (
	"strings"
	"testing"

	"mcpbox/internal/config"
)

// TestUpdateUsage: `mcpbox update` without a server names the servers
// it can update, or says the config has none.
func TestUpdateUsage(t *testing.T) {
	for _, tt := range []struct{ servers, want string }{
		{"  img: {image: 'registry.example/org/srv:1'}\n  pkg: {package: 'npm:left-pad@1.3.0'}\n  npx: {command: [npx, -y, some-server]}\n  cmd: {command: [srv]}\n",
			"name one SERVER of those with a source to re-resolve (an image or a package): img, pkg, npx (mcpbox update --help)"},
		{"  cmd: {command: [srv]}\n",
			"name one SERVER (mcpbox update --help); this config has no server with a source to re-resolve (image or package)"},
	} {
		c, err := config.Load("mcpbox.yaml", []byte("version: 1\nservers:\n"+tt.servers))
		if err != nil {
			t.Fatal(err)
		}
		if err := UpdateUsage(c); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("UpdateUsage = %v, want %q", err, tt.want)
		}
	}
}
