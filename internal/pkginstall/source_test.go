package pkginstall

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSource(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Source
		err  string
	}{
		{in: "npm:@modelcontextprotocol/server-memory@2026.1.0", want: Source{NPM, "@modelcontextprotocol/server-memory", "2026.1.0", ""}},
		{in: "npm:@modelcontextprotocol/server-memory", want: Source{NPM, "@modelcontextprotocol/server-memory", "latest", ""}},
		{in: "npm:mcp-remote@^0.1", want: Source{NPM, "mcp-remote", "^0.1", ""}},
		{in: "npm:@playwright/mcp@latest", want: Source{NPM, "@playwright/mcp", "latest", ""}},
		{in: "npm:tavily-mcp@>=0.1 <0.3", want: Source{NPM, "tavily-mcp", ">=0.1 <0.3", ""}},
		{in: "pypi:mcp-server-fetch@2025.4.7", want: Source{PyPI, "mcp-server-fetch", "2025.4.7", ""}},
		{in: "pypi:mcp-server-git==0.6.2", want: Source{PyPI, "mcp-server-git", "0.6.2", ""}},
		{in: "pypi:mcp_server_time", want: Source{PyPI, "mcp_server_time", "latest", ""}},
		{in: "npm:@scope/name@", err: "empty version"},
		{in: "npm:Upper", err: "not valid"},
		{in: "npm:../etc", err: "not valid"},
		{in: "npm:@scope/../x", err: "not valid"},
		{in: "npm:x@git+https://github.com/a/b", err: "not a registry version"},
		{in: "npm:x@file:../y", err: "not a registry version"},
		{in: "pypi:x[cli]", err: "extras"},
		{in: "pypi:../x", err: "not valid"},
		{in: "cargo:x", err: "unknown ecosystem"},
		{in: "server-memory", err: "want npm:NAME"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSource(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseSource(%q) = %+v, %v; want error containing %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromCommand(t *testing.T) {
	for _, tt := range []struct {
		argv []string
		want Source
		args []string
		ok   bool
		err  string
	}{
		// From the MCP servers' READMEs and users' Claude configs.
		{argv: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop", "/Users/me/Downloads"},
			want: Source{NPM, "@modelcontextprotocol/server-filesystem", "latest", ""}, args: []string{"/Users/me/Desktop", "/Users/me/Downloads"}, ok: true},
		{argv: []string{"npx", "-y", "@modelcontextprotocol/server-memory"},
			want: Source{NPM, "@modelcontextprotocol/server-memory", "latest", ""}, ok: true},
		{argv: []string{"npx", "@playwright/mcp@latest", "--headless"},
			want: Source{NPM, "@playwright/mcp", "latest", ""}, args: []string{"--headless"}, ok: true},
		{argv: []string{"npx", "--yes", "mcp-remote@0.1.18", "https://example.com/sse"},
			want: Source{NPM, "mcp-remote", "0.1.18", ""}, args: []string{"https://example.com/sse"}, ok: true},
		{argv: []string{"/usr/local/bin/npx", "-y", "--", "@upstash/context7-mcp@^1", "--transport", "stdio"},
			want: Source{NPM, "@upstash/context7-mcp", "^1", ""}, args: []string{"--transport", "stdio"}, ok: true},
		{argv: []string{"npx.cmd", "-y", "tavily-mcp@0.1.4"}, want: Source{NPM, "tavily-mcp", "0.1.4", ""}, ok: true},
		{argv: []string{"npx", "-y", "-p", "@modelcontextprotocol/server-everything@2025.1.1", "mcp-server-everything", "stdio"},
			want: Source{NPM, "@modelcontextprotocol/server-everything", "2025.1.1", "mcp-server-everything"}, args: []string{"stdio"}, ok: true},
		{argv: []string{"npx", "--package=@x/y", "y-cli"}, want: Source{NPM, "@x/y", "latest", "y-cli"}, ok: true},
		{argv: []string{"npm", "exec", "--yes", "--", "@x/y@2", "a"}, want: Source{NPM, "@x/y", "2", ""}, args: []string{"a"}, ok: true},
		{argv: []string{"pnpm", "dlx", "@modelcontextprotocol/server-memory"}, want: Source{NPM, "@modelcontextprotocol/server-memory", "latest", ""}, ok: true},
		{argv: []string{"yarn", "dlx", "-q", "x@1.0.0", "--flag"}, want: Source{NPM, "x", "1.0.0", ""}, args: []string{"--flag"}, ok: true},
		{argv: []string{"bunx", "x"}, want: Source{NPM, "x", "latest", ""}, ok: true},
		{argv: []string{"uvx", "mcp-server-fetch"}, want: Source{PyPI, "mcp-server-fetch", "latest", ""}, ok: true},
		{argv: []string{"uvx", "mcp-server-git", "--repository", "/path/to/repo"},
			want: Source{PyPI, "mcp-server-git", "latest", ""}, args: []string{"--repository", "/path/to/repo"}, ok: true},
		{argv: []string{"uvx", "--python", "3.12", "mcp-server-time==0.6.2", "--local-timezone=Europe/Berlin"},
			want: Source{PyPI, "mcp-server-time", "0.6.2", ""}, args: []string{"--local-timezone=Europe/Berlin"}, ok: true},
		{argv: []string{"uvx", "--from", "awslabs.aws-documentation-mcp-server@1.1.0", "awslabs.aws-documentation-mcp-server"},
			want: Source{PyPI, "awslabs.aws-documentation-mcp-server", "1.1.0", "awslabs.aws-documentation-mcp-server"}, ok: true},
		{argv: []string{"uv", "tool", "run", "mcp-server-fetch"}, want: Source{PyPI, "mcp-server-fetch", "latest", ""}, ok: true},
		{argv: []string{"pipx", "run", "mcp-server-fetch", "--ignore-robots-txt"},
			want: Source{PyPI, "mcp-server-fetch", "latest", ""}, args: []string{"--ignore-robots-txt"}, ok: true},
		{argv: []string{"pipx", "run", "--spec", "mcp-server-fetch==2025.4.7", "mcp-server-fetch"},
			want: Source{PyPI, "mcp-server-fetch", "2025.4.7", "mcp-server-fetch"}, ok: true},

		// Not package runners: left alone.
		{argv: []string{"node", "server.js"}},
		{argv: []string{"npm", "start"}},
		{argv: []string{"pnpm", "install"}},
		{argv: []string{"docker", "run", "-i", "--rm", "mcp/fetch"}},
		{argv: nil},

		// Recognised, but not installable as one pinned package.
		{argv: []string{"npx", "-c", "echo hi"}, ok: true, err: "shell command"},
		{argv: []string{"npx", "-p", "a", "-p", "b", "a"}, ok: true, err: "2 packages"},
		{argv: []string{"npx", "-y"}, ok: true, err: "without a package"},
		{argv: []string{"npx", "--frobnicate", "x"}, ok: true, err: "not understood"},
		{argv: []string{"npx", "github:user/repo"}, ok: true, err: "not valid"},
		{argv: []string{"npx", "./local"}, ok: true, err: "not valid"},
		{argv: []string{"uvx", "mcp-server-fetch>=2025.1,<2026"}, want: Source{PyPI, "mcp-server-fetch", ">=2025.1,<2026", ""}, ok: true},
		{argv: []string{"uvx", "mcp-server-fetch >= 2025.1, < 2026"}, want: Source{PyPI, "mcp-server-fetch", ">=2025.1,<2026", ""}, ok: true},
		{argv: []string{"uvx", "mcp-server-fetch~=2025.4"}, want: Source{PyPI, "mcp-server-fetch", "~=2025.4", ""}, ok: true},
		{argv: []string{"uvx", "mcp-server-fetch==2025.*"}, want: Source{PyPI, "mcp-server-fetch", "==2025.*", ""}, ok: true},
		{argv: []string{"uvx", "mcp-server-fetch>=x"}, ok: true, err: "not a registry version or specifier"},
		{argv: []string{"uvx", "--with", "numpy", "x"}, ok: true, err: "only one package"},
		{argv: []string{"uvx", "--from", "git+https://github.com/a/b", "b"}, ok: true, err: "not valid"},
		{argv: []string{"pipx", "run"}, ok: true, err: "without a package"},

		// Another registry or index: refused, not installed from the
		// default one under the same name (dependency confusion).
		{argv: []string{"npx", "-y", "--registry", "https://npm.corp.example/", "corp-mcp-server"}, ok: true, err: "npx --registry is not honoured"},
		{argv: []string{"npm", "exec", "--registry=https://npm.corp.example/", "corp-mcp-server"}, ok: true, err: "--registry is not honoured"},
		{argv: []string{"uvx", "--index-url", "https://pypi.corp.example/simple", "corp-mcp-server"}, ok: true, err: "uvx --index-url is not honoured"},
		{argv: []string{"uvx", "-i", "https://pypi.corp.example/simple", "corp-mcp-server"}, ok: true, err: "not honoured"},
		{argv: []string{"uvx", "--default-index=https://pypi.corp.example/simple", "corp-mcp-server"}, ok: true, err: "not honoured"},
		{argv: []string{"uvx", "--extra-index-url", "https://pypi.corp.example/simple", "corp-mcp-server"}, ok: true, err: "not honoured"},
		{argv: []string{"pipx", "run", "--index-url", "https://pypi.corp.example/simple", "corp-mcp-server"}, ok: true, err: "pipx run --index-url is not honoured"},
		{argv: []string{"pipx", "run", "--pip-args=--index-url=https://x/", "corp-mcp-server"}, ok: true, err: "--pip-args"},
	} {
		t.Run(strings.Join(tt.argv, " "), func(t *testing.T) {
			got, args, ok, err := FromCommand(tt.argv)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (err %v)", ok, tt.ok, err)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("source (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.args, args, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") })); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseSource: whatever parses names a path-safe package and prints
// back to itself.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"npm:@a/b@^1", "pypi:x==1", "npm:x", "npm:@a/..", "pypi:a@b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src, err := ParseSource(s)
		if err != nil {
			return
		}
		for _, part := range strings.Split(src.Name, "/") {
			if part == "" || part == "." || part == ".." {
				t.Fatalf("%q: name %q has a path-unsafe part", s, src.Name)
			}
		}
		again, err := ParseSource(src.String())
		if err != nil || again != src {
			t.Fatalf("%q: %+v prints as %q, which parses to %+v, %v", s, src, src.String(), again, err)
		}
	})
}
