package config

import (
	"slices"
	"strings"
	"testing"
)

func TestPackageServer(t *testing.T) {
	c, err := Load("t.yaml", []byte("version: 1\nservers:\n  mem:\n    package: npm:@modelcontextprotocol/server-memory@^2026.1\n    args: [--x, \"1\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Servers[0]
	if s.Package != "npm:@modelcontextprotocol/server-memory@^2026.1" || !slices.Equal(s.Args, []string{"--x", "1"}) {
		t.Fatalf("got package %q args %q", s.Package, s.Args)
	}
	// Marshal keeps both keys.
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Load("t.yaml", out)
	if err != nil || c2.Servers[0].Package != s.Package || !slices.Equal(c2.Servers[0].Args, s.Args) {
		t.Fatalf("round trip: %v\n%s", err, out)
	}
}

// TestPackageNPMRangeWithSpaces: npm's own range spellings, which have
// spaces (">=1.2.0 <2", "A - B", "||" between groups), are accepted.
func TestPackageNPMRangeWithSpaces(t *testing.T) {
	for _, v := range []string{">=2025.8.0 <2026.0.0", "2025.4.25 - 2025.9", ">=2025.8.0 <2026 || 0.6.x"} {
		pkg := "npm:@modelcontextprotocol/server-memory@" + v
		c, err := Load("t.yaml", []byte("version: 1\nservers:\n  mem:\n    package: \""+pkg+"\"\n"))
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		if c.Servers[0].Package != pkg {
			t.Fatalf("package %q, want %q", c.Servers[0].Package, pkg)
		}
	}
}

func TestPackageInvalid(t *testing.T) {
	const head = "version: 1\nservers:\n  s:\n"
	tests := []struct{ name, yaml, want string }{
		{"no ecosystem", head + "    package: left-pad\n", `t.yaml:4:14: servers.s.package: "left-pad": want npm:NAME[@VERSION] or pypi:NAME[@VERSION]`},
		{"unknown ecosystem", head + "    package: cargo:ripgrep\n", `t.yaml:4:14: servers.s.package: unknown ecosystem "cargo" (want npm or pypi)`},
		{"scope without name", head + "    package: npm:@scope\n", `t.yaml:4:14: servers.s.package: "npm:@scope": want npm:NAME[@VERSION] or pypi:NAME[@VERSION]`},
		{"empty", head + "    package: \"\"\n", `t.yaml:4:14: servers.s.package: "": want`},
		{"with command", head + "    command: [x]\n    package: npm:x\n", `t.yaml:5:14: servers.s: package is exclusive with command, image and builtin`},
		{"with url", head + "    url: https://example.com/mcp\n    package: npm:x\n", `t.yaml:4:10: servers.s: command and url are exclusive`},
		{"args without package", head + "    command: [x]\n    args: [y]\n", `t.yaml:5:11: servers.s.args: args replace an image's Cmd`},
		{"with image", head + "    image: ghcr.io/x/y:1\n    package: npm:x\n", `t.yaml:5:14: servers.s: package is exclusive with command, image and builtin`},
		{"space in an npm name", head + "    package: \"npm:left pad@1\"\n", `t.yaml:4:14: servers.s.package: "npm:left pad@1" must not contain spaces`},
		{"blank npm version", head + "    package: \"npm:left-pad@  \"\n", `t.yaml:4:14: servers.s.package: "npm:left-pad@  " must not contain spaces`},
		{"tab in an npm range", head + "    package: \"npm:left-pad@>=1\\t<2\"\n", `t.yaml:4:14: servers.s.package: "npm:left-pad@>=1\t<2" must not contain spaces`},
		{"space in a pypi version", head + "    package: \"pypi:mcp-server-fetch@>=1, <2\"\n", `t.yaml:4:14: servers.s.package: "pypi:mcp-server-fetch@>=1, <2" must not contain spaces`},
		{"group", head + "    package: npm:x\n    placement: group:g\n", `t.yaml:5:16: servers.s.placement: a package server runs in a sandbox of its own`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte(tt.yaml))
			if err == nil || !strings.HasPrefix(strings.Split(err.Error(), "\n")[0], tt.want) {
				t.Fatalf("got %v\nwant prefix %s", err, tt.want)
			}
		})
	}
}
