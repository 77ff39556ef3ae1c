package importer

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"mcpbox/internal/config"
)

// Fake credentials, shaped like the real formats so that value detection
// has something to find.
const (
	braveKey    = "BSAq9x8c7v6b5n4m3k2j1h0gFAKE"
	githubToken = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	linearKey   = "lin_api_FAKEa1b2c3d4e5f6g7h8i9j0"
	dbPassword  = "s3cret-db-pw"
)

var claudeDesktop = `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/alice/Desktop", "/Users/alice/Downloads"]
    },
    "Brave Search": {
      "command": "uvx",
      "args": ["mcp-server-brave-search"],
      "env": {"BRAVE_API_KEY": "` + braveKey + `", "LOG_LEVEL": "debug"}
    },
    "github": {
      "command": "docker",
      "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "` + githubToken + `"}
    },
    "linear": {
      "url": "https://mcp.linear.app/mcp",
      "headers": {"Authorization": "Bearer ` + linearKey + `"}
    }
  }
}
`

var vscode = `{
  // .vscode/mcp.json: JSONC, with comments and trailing commas
  "inputs": [{"type": "promptString", "id": "gh-token", "password": true}],
  "servers": {
    "memory": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"],},
    /* remote ones */
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${input:gh-token}"}},
    "legacy": {"type": "sse", "url": "https://example.com/sse"},
    "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC", "OPENAI_API_KEY": "${env:OPENAI_API_KEY}"}},
  },
}
`

// importYAML parses, converts and renders input as `mcpbox import`
// does. msgs holds the notes and the variables, one a line, as the
// command prints them on standard error.
func importYAML(t *testing.T, input string) (out, msgs string) {
	t.Helper()
	cf, err := ParseClientFile("client.json", []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	if len(res.Config.Servers) == 0 {
		t.Fatalf("no server imported: %q", res.Notes)
	}
	raw, err := Render(res, "client.json")
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	var b strings.Builder
	for _, n := range res.Notes {
		b.WriteString(n + "\n")
	}
	for _, v := range res.Vars {
		b.WriteString(v.Name + "\t" + v.Use + "\n")
	}
	return string(raw), b.String()
}

// sandboxed is what import gives every local server besides its command.
func sandboxed(name string, command ...string) *config.Server {
	return &config.Server{
		Name:       name,
		Command:    command,
		Filesystem: config.Filesystem{Output: &config.Output{}},
		Tools:      config.Tools{Allow: []string{"*"}},
	}
}

var ignorePos = cmpopts.IgnoreTypes(config.Meta{}, config.Pos{})

func TestImportYAML(t *testing.T) {
	fs := sandboxed("filesystem", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/Users/alice/Desktop", "/Users/alice/Downloads")
	brave := sandboxed("brave-search", "uvx", "mcp-server-brave-search")
	brave.Env = []config.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}
	brave.Secrets = []config.Secret{{Name: "BRAVE_API_KEY", From: "env:BRAVE_API_KEY"}}
	gh := sandboxed("github")
	gh.Command, gh.Image.Ref = nil, "ghcr.io/github/github-mcp-server"
	gh.Secrets = []config.Secret{{Name: "GITHUB_PERSONAL_ACCESS_TOKEN", From: "env:GITHUB_PERSONAL_ACCESS_TOKEN"}}
	linear := &config.Server{Name: "linear", URL: "https://mcp.linear.app/mcp", Transport: config.TransportAuto, Tools: config.Tools{Allow: []string{"*"}},
		Headers: []config.Header{{Name: "Authorization", From: "env:MCPBOX_LINEAR_AUTHORIZATION"}}}

	memory := sandboxed("memory", "npx", "-y", "@modelcontextprotocol/server-memory")
	ghRemote := &config.Server{Name: "github", URL: "https://api.githubcopilot.com/mcp/", Tools: config.Tools{Allow: []string{"*"}},
		Headers: []config.Header{{Name: "Authorization", From: "env:MCPBOX_GITHUB_AUTHORIZATION"}}}
	legacy := &config.Server{Name: "legacy", URL: "https://example.com/sse", Transport: config.TransportSSE, OAuth: &config.ServerOAuth{}, Tools: config.Tools{Allow: []string{"*"}}}
	tm := sandboxed("time", "uvx", "mcp-server-time")
	tm.Env = []config.EnvVar{{Name: "TZ", Value: "UTC"}}
	tm.Secrets = []config.Secret{{Name: "OPENAI_API_KEY", From: "env:OPENAI_API_KEY"}}

	tests := []struct {
		name      string
		input     string
		want      []*config.Server
		secrets   []string // must not appear in stdout or stderr
		inYAML    []string
		inStderr  []string
		uncomment string // a hint line that must yield a valid config when uncommented
	}{
		{
			name:    "claude desktop",
			input:   claudeDesktop,
			want:    []*config.Server{fs, brave, gh, linear},
			secrets: []string{braveKey, githubToken, linearKey},
			inYAML: []string{
				"# network: {egress: [{host: registry.npmjs.org}]}",
				"# network: {egress: [{host: pypi.org}, {host: files.pythonhosted.org}]}",
				"# was: docker run ... ghcr.io/github/github-mcp-server (mcpbox pulls and runs the image itself; no docker daemon)",
				`# The sandbox does not see "/Users/alice/Desktop", "/Users/alice/Downloads"`,
			},
			inStderr:  []string{"BRAVE_API_KEY", "GITHUB_PERSONAL_ACCESS_TOKEN", "MCPBOX_LINEAR_AUTHORIZATION", `"Brave Search" is called brave-search`},
			uncomment: "network: {egress: [{host: registry.npmjs.org}]}",
		},
		{
			name:      "vscode jsonc",
			input:     vscode,
			want:      []*config.Server{memory, ghRemote, legacy, tm},
			inYAML:    []string{"# network: {egress: [{host: registry.npmjs.org}]}", "transport: sse"},
			inStderr:  []string{"MCPBOX_GITHUB_AUTHORIZATION", "OPENAI_API_KEY"},
			uncomment: "network: {egress: [{host: pypi.org}, {host: files.pythonhosted.org}]}",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs := importYAML(t, tt.input)
			c, err := config.Load("mcpbox.yaml", []byte(out))
			if err != nil {
				t.Fatalf("output does not load: %v\n%s", err, out)
			}
			if diff := cmp.Diff(tt.want, c.Servers, ignorePos); diff != "" {
				t.Errorf("servers (-want +got):\n%s\n%s", diff, out)
			}
			if w := config.Warnings(c); len(w) > 0 {
				t.Errorf("warnings on the generated config: %v", w)
			}
			for _, s := range tt.secrets {
				if strings.Contains(out, s) || strings.Contains(errs, s) {
					t.Errorf("credential %q copied to the output", s)
				}
			}
			for _, s := range tt.inYAML {
				if !strings.Contains(out, s) {
					t.Errorf("YAML lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.inStderr {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errs)
				}
			}
			checkUncomment(t, out, tt.uncomment)
		})
	}
}

// checkUncomment uncomments hint in out and checks that the config then
// loads with the hinted egress rule.
func checkUncomment(t *testing.T, out, hint string) {
	t.Helper()
	edited := strings.Replace(out, "# "+hint, hint, 1)
	if edited == out {
		t.Fatalf("hint %q not found", hint)
	}
	c, err := config.Load("mcpbox.yaml", []byte(edited))
	if err != nil {
		t.Fatalf("uncommented hint does not load: %v\n%s", err, edited)
	}
	n := 0
	for _, s := range c.Servers {
		n += len(s.Network.Egress)
	}
	if n == 0 {
		t.Errorf("uncommented hint gave no egress rule:\n%s", edited)
	}
}

// TestRewriteKeepsSkipped: the entries an import left out (disabled, or
// not importable) stay in the rewritten client config as they were, so
// that following the migration loses no server; project entries of
// ~/.claude.json are not moved to its top level.
func TestRewriteKeepsSkipped(t *testing.T) {
	input := `{"mcpServers": {
  "api": {"type": "http", "url": "${API_URL:-https://api.example.com/mcp}"},
  "off": {"command": "npx", "args": ["-y", "some-server"], "disabled": true},
  "gh": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]}
}, "projects": {"/p": {"mcpServers": {"bad": {"command": 7}}}}}`
	cf, err := ParseClientFile("client.json", []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	if !slices.Equal(res.Skipped, []string{"api", "off"}) {
		t.Fatalf("Skipped = %q, want api and off (not the project's bad)", res.Skipped)
	}
	raw, notes, err := Rewrite(cf, RewriteOptions{Binary: "/bin/mcpbox", Config: "/c/mcpbox.yaml", Keep: res.Skipped})
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ MCPServers map[string]json.RawMessage }
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("output: %v\n%s", err, raw)
	}
	if got := slices.Sorted(maps.Keys(out.MCPServers)); !slices.Equal(got, []string{"api", "mcpbox", "off"}) {
		t.Errorf("servers %q, want mcpbox and the two left out\n%s", got, raw)
	}
	var off map[string]any
	json.Unmarshal(out.MCPServers["off"], &off)
	if off["disabled"] != true || off["command"] != "npx" {
		t.Errorf("the disabled entry changed: %s", out.MCPServers["off"])
	}
	if n := strings.Join(notes, "\n"); !strings.Contains(n, `kept as they were, for the client to run itself (mcpbox does not run them): "api", "off"`) {
		t.Errorf("notes %q", notes)
	}
}

// TestRewriteClientInputs: a value the client fills in from its own
// inputs (VS Code's ${input:ID}) reaches mcpbox through the rewritten
// entry's env, so the client still asks for it and mcpbox gets it; a
// value with a credential of its own, or from the host's environment, is
// not copied there.
func TestRewriteClientInputs(t *testing.T) {
	const token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"
	input := `{
  "inputs": [{"type": "promptString", "id": "gh-token", "password": true}, {"type": "promptString", "id": "db.pass"}],
  "servers": {
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${input:gh-token}"}},
    "gh-local": {"command": "gh-server", "env": {"GITHUB_TOKEN": "${input:gh-token}", "DB_PASSWORD": "${input:db.pass}"}},
    "mixed": {"command": "m", "env": {"API_KEY": "${input:gh-token}` + token + `"}},
    "hostenv": {"command": "h", "env": {"OPENAI_API_KEY": "${env:OPENAI_API_KEY}"}},
    "literal": {"command": "l", "env": {"SERVICE_TOKEN": "` + token + `"}}
  }
}`
	cf, err := ParseClientFile("mcp.json", []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	header := ""
	for _, v := range res.Vars {
		if strings.HasPrefix(v.Use, "servers.github.headers.Authorization") {
			header = v.Name
		}
	}
	want := map[string]string{header: "Bearer ${input:gh-token}", "GITHUB_TOKEN": "${input:gh-token}", "DB_PASSWORD": "${input:db.pass}"}
	if diff := cmp.Diff(want, res.ClientEnv()); header == "" || diff != "" {
		t.Fatalf("ClientEnv (-want +got):\n%s\nvars %+v", diff, res.Vars)
	}
	raw, notes, err := Rewrite(cf, RewriteOptions{Binary: "/bin/mcpbox", Config: "/c/mcpbox.yaml", Env: res.ClientEnv()})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Inputs  []map[string]any
		Servers map[string]clientEntry
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("output: %v\n%s", err, raw)
	}
	if diff := cmp.Diff(want, out.Servers["mcpbox"].Env); diff != "" || len(out.Inputs) != 2 || strings.Contains(string(raw), token) {
		t.Errorf("the mcpbox entry's env (-want +got):\n%s\n%s", diff, raw)
	}
	if n := strings.Join(notes, "\n"); !strings.Contains(n, `the "mcpbox" entry's env passes DB_PASSWORD, GITHUB_TOKEN, `+header+` from the client's inputs`) {
		t.Errorf("notes %q", notes)
	}
	// A config with no client inputs gets no env.
	cf, _ = ParseClientFile("c.json", []byte(claudeDesktop))
	if env := Convert(cf, Host{}).ClientEnv(); env != nil {
		t.Errorf("ClientEnv of literal credentials = %v, want none", env)
	}
}

func TestRewrite(t *testing.T) {
	const abs = "/home/alice/conf/mcpbox.yaml"
	opts := RewriteOptions{Binary: "/opt/mcpbox/mcpbox", Config: abs}
	want := map[string]clientEntry{"mcpbox": {Command: "/opt/mcpbox/mcpbox", Args: []string{"serve", "--config", abs, "--stdio"}}}
	wantStdio := map[string]clientEntry{"mcpbox": {Type: "stdio", Command: "/opt/mcpbox/mcpbox", Args: []string{"serve", "--config", abs, "--stdio"}}}
	tests := []struct {
		name     string
		input    string
		wantKeys []string // top-level keys, in order
		want     map[string]clientEntry
		secrets  []string
		note     string // in the notes; empty: no note
	}{
		{
			name:     "claude desktop keeps other keys",
			input:    claudeDesktop,
			wantKeys: []string{"globalShortcut", "mcpServers"},
			want:     want,
			secrets:  []string{braveKey, githubToken, linearKey},
		},
		{
			name:     "vscode",
			input:    vscode,
			wantKeys: []string{"inputs", "servers"},
			want:     wantStdio,
		},
		{
			name:     "both server keys",
			input:    `{"servers": {"a": {"command": "a"}}, "x": 1, "mcpServers": {"b": {"command": "b"}}}`,
			wantKeys: []string{"servers", "x"},
			want:     wantStdio,
		},
		{
			name:     "claude code state file",
			input:    `{"numStartups": 3, "mcpServers": {"a": {"command": "a"}}, "projects": {"/p": {"mcpServers": {"b": {"command": "b"}}}}}`,
			wantKeys: []string{"mcpServers"},
			want:     want,
			note:     "client.json holds the client's state besides servers: merge this mcpServers object",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cf, err := ParseClientFile("client.json", []byte(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			raw, notes, err := Rewrite(cf, opts)
			if err != nil {
				t.Fatal(err)
			}
			out, errs := string(raw), strings.Join(notes, "\n")
			ms, err := members([]byte(out))
			if err != nil {
				t.Fatalf("output is no JSON object: %v\n%s", err, out)
			}
			var keys []string
			var servers map[string]clientEntry
			for _, m := range ms {
				keys = append(keys, m.key)
				if m.key == "mcpServers" || m.key == "servers" {
					if err := json.Unmarshal(m.val, &servers); err != nil {
						t.Fatal(err)
					}
				}
			}
			if diff := cmp.Diff(tt.wantKeys, keys); diff != "" {
				t.Errorf("top-level keys (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, servers); diff != "" {
				t.Errorf("servers (-want +got):\n%s\n%s", diff, out)
			}
			for _, s := range tt.secrets {
				if strings.Contains(out, s) || strings.Contains(errs, s) {
					t.Errorf("credential %q copied to the output", s)
				}
			}
			if (tt.note == "") != (len(notes) == 0) || !strings.Contains(errs, tt.note) {
				t.Errorf("notes %q, want one with %q", notes, tt.note)
			}
		})
	}
	cf, err := ParseClientFile("client.json", []byte(claudeDesktop))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Rewrite(cf, RewriteOptions{Binary: "mcpbox"}); err == nil {
		t.Error("Rewrite without a config path succeeded")
	}
}

func TestImportEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    []*config.Server
		absent  []string // must appear neither in stdout nor stderr
		present []string // in stdout or stderr (the variables to set)
	}{
		{
			name:  "credentials in arguments and url",
			input: `{"mcpServers": {"pg": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-postgres", "postgresql://alice:` + dbPassword + `@localhost/db", "--api-key", "plain-key-value", "--password=hunter2", "--token-file", "/run/secrets/t"]}, "r": {"url": "https://mcp.example.com/mcp?api_key=` + dbPassword + `&team=x"}}}`,
			want: []*config.Server{
				sandboxed("pg", "npx", "-y", "@modelcontextprotocol/server-postgres", "postgresql://alice:REDACTED@localhost/db", "--api-key", "REDACTED", "--password=REDACTED", "--token-file", "/run/secrets/t"),
				{Name: "r", URL: "https://mcp.example.com/mcp?team=x", Transport: config.TransportAuto, Query: []config.Header{{Name: "api_key", From: "env:MCPBOX_R_API_KEY"}}, Tools: config.Tools{Allow: []string{"*"}}},
			},
			absent:  []string{dbPassword, "plain-key-value", "hunter2"},
			present: []string{"MCPBOX_R_API_KEY\tservers.r.query.api_key"},
		},
		{
			name: "url query credentials move to query: by name, by shape, encoded, or a host variable",
			input: `{"mcpServers": {
				"smith": {"type": "http", "url": "https://server.smithery.ai/@o/s/mcp?api_key=` + dbPassword + `&profile=p1"},
				"shaped": {"url": "https://x.example.com/mcp?k=ghp_0123456789abcdefghijABCDEFGHIJ012345"},
				"hostvar": {"url": "https://y.example.com/mcp?token=${GH_TOKEN}&lang=en"},
				"encoded": {"url": "https://z.example.com/mcp?config=eyJhcGlLZXkiOiAic2stbGl2ZS1hYmNkZWYwMTIzNDU2Nzg5In0%3D&theme=eyJ0aGVtZSI6ICJkYXJrIn0="}}}`,
			want: []*config.Server{
				{Name: "smith", URL: "https://server.smithery.ai/@o/s/mcp?profile=p1", Query: []config.Header{{Name: "api_key", From: "env:MCPBOX_SMITH_API_KEY"}}, Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "shaped", URL: "https://x.example.com/mcp", Transport: config.TransportAuto, Query: []config.Header{{Name: "k", From: "env:MCPBOX_SHAPED_K"}}, Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "hostvar", URL: "https://y.example.com/mcp?lang=en", Transport: config.TransportAuto, Query: []config.Header{{Name: "token", From: "env:GH_TOKEN"}}, Tools: config.Tools{Allow: []string{"*"}}},
				// Smithery's config=: base64 of JSON with a key; a JSON
				// without one stays in the url.
				{Name: "encoded", URL: "https://z.example.com/mcp?theme=eyJ0aGVtZSI6ICJkYXJrIn0%3D", Transport: config.TransportAuto, Query: []config.Header{{Name: "config", From: "env:MCPBOX_ENCODED_CONFIG"}}, Tools: config.Tools{Allow: []string{"*"}}},
			},
			absent:  []string{dbPassword, "ghp_0123456789", "REDACTED", "mcpbox login", "eyJhcGlLZXki"},
			present: []string{"MCPBOX_SMITH_API_KEY\tservers.smith.query.api_key", "GH_TOKEN\tservers.hostvar.query.token"},
		},
		{
			name:  "same variable, different values",
			input: `{"mcpServers": {"a": {"command": "a", "env": {"API_TOKEN": "one", "PATH": "/usr/bin", "DATABASE_URL": "postgres://u:` + dbPassword + `@h/d"}}, "b": {"command": "b", "env": {"API_TOKEN": "two"}}, "c": {"command": "c", "env": {"API_TOKEN": "one"}}}}`,
			want: []*config.Server{
				withEnv(sandboxed("a", "a"), []config.EnvVar{{Name: "PATH", Value: "/usr/bin"}},
					config.Secret{Name: "API_TOKEN", From: "env:API_TOKEN"}, config.Secret{Name: "DATABASE_URL", From: "env:DATABASE_URL"}),
				withEnv(sandboxed("b", "b"), nil, config.Secret{Name: "API_TOKEN", From: "env:MCPBOX_B_API_TOKEN"}),
				withEnv(sandboxed("c", "c"), nil, config.Secret{Name: "API_TOKEN", From: "env:API_TOKEN"}),
			},
			absent: []string{dbPassword, `"one"`, `"two"`, "one\n", "two\n"},
		},
		{
			name: "remote entries and mcp-remote wrappers get oauth unless they send Authorization or a key",
			input: `{"mcpServers": {
				"linear": {"type": "http", "url": "https://mcp.linear.app/mcp"},
				"old": {"type": "sse", "url": "https://mcp.example.com/sse"},
				"wrapped": {"command": "npx", "args": ["-y", "mcp-remote@0.1.29", "https://mcp.notion.com/mcp", "--transport", "http-only"]},
				"keyed": {"command": "npx", "args": ["mcp-remote", "https://mcp.example.org/mcp", "--header", "Authorization: Bearer ${AUTH_TOKEN}"], "env": {"AUTH_TOKEN": "` + dbPassword + `"}},
				"legacy": {"command": "npx", "args": ["-y", "mcp-remote", "https://mcp.example.org/sse", "--transport=sse-only"]},
				"static": {"url": "https://api.example.net/mcp", "headers": {"Authorization": "Bearer ${GH}"}},
				"apikey": {"url": "https://mcp.context7.com/mcp", "headers": {"CONTEXT7_API_KEY": "${C7}"}},
				"other": {"command": "npx", "args": ["-y", "some-server", "https://example.com"]}}}`,
			want: []*config.Server{
				{Name: "linear", URL: "https://mcp.linear.app/mcp", OAuth: &config.ServerOAuth{}, Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "old", URL: "https://mcp.example.com/sse", Transport: config.TransportSSE, OAuth: &config.ServerOAuth{}, Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "wrapped", URL: "https://mcp.notion.com/mcp", OAuth: &config.ServerOAuth{}, Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "keyed", URL: "https://mcp.example.org/mcp", Transport: config.TransportAuto, Headers: []config.Header{{Name: "Authorization", From: "env:MCPBOX_KEYED_AUTHORIZATION"}}, Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "legacy", URL: "https://mcp.example.org/sse", Transport: config.TransportSSE, OAuth: &config.ServerOAuth{}, Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "static", URL: "https://api.example.net/mcp", Transport: config.TransportAuto, Headers: []config.Header{{Name: "Authorization", From: "env:MCPBOX_STATIC_AUTHORIZATION"}}, Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "apikey", URL: "https://mcp.context7.com/mcp", Transport: config.TransportAuto, Headers: []config.Header{{Name: "CONTEXT7_API_KEY", From: "env:C7"}}, Tools: config.Tools{Allow: []string{"*"}}},
				sandboxed("other", "npx", "-y", "some-server", "https://example.com"),
			},
			absent:  []string{dbPassword},
			present: []string{"run `mcpbox login linear --config FILE`", "run `mcpbox login wrapped --config FILE`"},
		},
		{
			// Cursor tries both transports for an entry without a type; a
			// server on this machine is most likely a development server
			// that wants no login (with oauth on, each start warned of a
			// login that the server could not do).
			name: "no type: both transports; servers on this machine: no oauth",
			input: `{"mcpServers": {
				"dev": {"url": "http://localhost:3001/sse"},
				"v6": {"type": "http", "url": "https://[::1]:8443/mcp"},
				"hosted": {"url": "https://mcp.example.com/mcp"}}}`,
			want: []*config.Server{
				{Name: "dev", URL: "http://localhost:3001/sse", Transport: config.TransportAuto, Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "v6", URL: "https://[::1]:8443/mcp", Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "hosted", URL: "https://mcp.example.com/mcp", Transport: config.TransportAuto, OAuth: &config.ServerOAuth{}, Tools: config.Tools{Allow: []string{"*"}}},
			},
			present: []string{"No OAuth: a server on this machine. If it answers 401, add oauth: {} and run `mcpbox login dev --config FILE`", "run `mcpbox login hosted --config FILE`"},
		},
		{
			name: "a key in the url's path stays (it cannot be a reference), noted, and needs no oauth",
			input: `{"mcpServers": {
				"zapier": {"type": "http", "url": "https://mcp.zapier.com/api/mcp/s/NjM0ZjUxYjAtOTk4Zi00Y2Q1LWI3ZTEtMzA1/mcp"},
				"lower": {"type": "http", "url": "https://mcp.example.org/s/k3j4h5g6f7d8s9a0q1w2e3r4t5y6u7i8o9p0/mcp"},
				"plain": {"type": "http", "url": "https://mcp.example.com/v1/2025-06-18/mcp"}}}`,
			want: []*config.Server{
				{Name: "zapier", URL: "https://mcp.zapier.com/api/mcp/s/NjM0ZjUxYjAtOTk4Zi00Y2Q1LWI3ZTEtMzA1/mcp", Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "lower", URL: "https://mcp.example.org/s/k3j4h5g6f7d8s9a0q1w2e3r4t5y6u7i8o9p0/mcp", Tools: config.Tools{Allow: []string{"*"}}},
				{Name: "plain", URL: "https://mcp.example.com/v1/2025-06-18/mcp", OAuth: &config.ServerOAuth{}, Tools: config.Tools{Allow: []string{"*"}}},
			},
			absent:  []string{"mcpbox login zapier", "mcpbox login lower", `server "plain": its url`},
			present: []string{`server "zapier": its url's path holds what looks like a key`, `server "lower": its url's path`, "mcpbox login plain"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs := importYAML(t, tt.input)
			c, err := config.Load("mcpbox.yaml", []byte(out))
			if err != nil {
				t.Fatalf("output does not load: %v\n%s", err, out)
			}
			if diff := cmp.Diff(tt.want, c.Servers, ignorePos); diff != "" {
				t.Errorf("servers (-want +got):\n%s\n%s", diff, out)
			}
			for _, s := range tt.absent {
				if strings.Contains(out, s) || strings.Contains(errs, s) {
					t.Errorf("%q copied to the output:\n%s\n%s", s, out, errs)
				}
			}
			for _, s := range tt.present {
				if !strings.Contains(out, s) && !strings.Contains(errs, s) {
					t.Errorf("%q not in the output:\n%s\n%s", s, out, errs)
				}
			}
		})
	}
}

func withEnv(s *config.Server, env []config.EnvVar, secrets ...config.Secret) *config.Server {
	s.Env, s.Secrets = env, secrets
	return s
}

func TestSanitizeName(t *testing.T) {
	long := strings.Repeat("abc", 30)
	tests := []struct{ in, want string }{
		{"filesystem", "filesystem"},
		{"Brave Search", "brave-search"},
		{"@modelcontextprotocol/server-github", "modelcontextprotocol-server-github"},
		{"a__b___c", "a_b_c"},
		{"--x--", "x"},
		{"Ünïcödé", "n-c-d"},
		{"!!!", "server"},
		{"", "server"},
		{long, long[:63]},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := sanitizeName(tt.in); got != tt.want {
				t.Errorf("sanitizeName(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	taken := map[string]bool{"a": true, "a-2": true, long[:63]: true}
	if got := uniqueName("a", taken); got != "a-3" {
		t.Errorf("uniqueName(a) = %q, want a-3", got)
	}
	if got := uniqueName(long[:63], taken); got != long[:61]+"-2" {
		t.Errorf("uniqueName(long) = %q, want %q", got, long[:61]+"-2")
	}
}

func TestCredentialDetection(t *testing.T) {
	tests := []struct {
		name, value string
		want        bool
	}{
		{"GITHUB_PERSONAL_ACCESS_TOKEN", "x", true},
		{"BRAVE_API_KEY", "x", true},
		{"client_secret", "x", true},
		{"DB_PASSWORD", "", true},
		{"GITHUB_PAT", "x", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", "/k.json", true},
		{"LOG_LEVEL", "debug", false},
		{"PATH", "/usr/bin", false},
		{"PYTHONPATH", "/opt/lib", false},
		{"HOME_URL", "https://example.com/a?b=c", false},
		{"SOME_VALUE", githubToken, true},
		{"DATABASE_URL", "postgres://u:pw@h/db", true},
		{"ENDPOINT", "https://h/x?access_token=abc", true},
		// By shape alone, under names that say nothing.
		{"OPENAPI_MCP_HEADERS", `{"Authorization": "Bearer ntn_1234567890abcdefghijklmnopqrstuvwxyzABCDEFGH", "Notion-Version": "2022-06-28"}`, true},
		{"HF_AUTH", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", true},
		{"SENTRY_DSN", "https://0123456789abcdef0123456789abcdef@o123.ingest.sentry.io/456", true},
		{"CONN", "Server=db;User Id=sa;Password=Hunter2Hunter2;", true},
		{"MYCONF", "Bearer " + githubToken, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := config.CredentialName(tt.name) || credentialValue(tt.value); got != tt.want {
				t.Errorf("credential(%s=%q) = %v, want %v", tt.name, tt.value, got, tt.want)
			}
		})
	}
}

func TestStripJSONC(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a": "http://x/*y*/"} // c`, `{"a":"http://x/*y*/"}`},
		{"{\"a\": 1, /* c\n */ \"b\": [1, 2,],}", `{"a":1,"b":[1,2]}`},
		{`{"a": "q\"//", "b": ","}`, `{"a":"q\"//","b":","}`},
		{"\ufeff{\"a\": 1}", `{"a":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var buf bytes.Buffer
			if err := json.Compact(&buf, stripJSONC([]byte(tt.in))); err != nil {
				t.Fatalf("stripped JSON is invalid: %v", err)
			}
			if buf.String() != tt.want {
				t.Errorf("got %s, want %s", buf.String(), tt.want)
			}
		})
	}
}

func TestRenderYAMLChecks(t *testing.T) {
	c := &config.Config{Version: 1, Servers: []*config.Server{{Name: "Not A Name", Command: []string{"x"}}}}
	if out, err := Render(&Result{Config: c}, "f.json"); err == nil {
		t.Errorf("an invalid config was printed:\n%s", out)
	}
}

func TestHostPathHints(t *testing.T) {
	tests := []struct {
		argv []string
		want string // quoted paths in the hint; empty: no hint
	}{
		{[]string{"/usr/bin/node", "/usr/lib/node_modules/x/index.js", "relative/x", "-y"}, ""},
		{[]string{"node", "/workspace/input", "/etc/ssl/certs"}, ""},
		{[]string{"/opt/homebrew/bin/npx", "~/notes", "--root=/home/alice/src", "/tmp/x"}, `"/opt/homebrew/bin/npx", "~/notes", "/home/alice/src", "/tmp/x"`},
		{[]string{"node.exe", `C:\Users\alice\server.js`}, `"C:\\Users\\alice\\server.js"`},
		{[]string{"x", "/a/../usr/../home/b"}, `"/a/../usr/../home/b"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.argv, " "), func(t *testing.T) {
			h := hostPathHints(tt.argv)
			if tt.want == "" {
				if h != nil {
					t.Errorf("unexpected hint %q", h)
				}
				return
			}
			if len(h) == 0 || !strings.Contains(h[0], tt.want+":") {
				t.Errorf("hint %q does not name %s", h, tt.want)
			}
		})
	}
}

// TestImportURLCredentialsNeverCopied: a credential in a remote URL
// reaches neither the config nor the messages, whatever form its query
// takes (a review's list): a query that does not parse whole, repeated
// and escaped names, base64 JSON as an array, in a string, or a number,
// and a fragment.
func TestImportURLCredentialsNeverCopied(t *testing.T) {
	const (
		obj    = "eyJhcGlLZXkiOiAic2stbGl2ZS1hYmNkZWYwMTIzNDU2Nzg5In0="                     // {"apiKey": "sk-live-..."}
		arr    = "W3siYXBpS2V5IjogInNrLWxpdmUtYWJjZGVmMDEyMzQ1Njc4OSJ9XQ=="                 // [{"apiKey": ...}]
		nested = "eyJjZmciOiAie1wiYXBpS2V5XCI6IFwic2stbGl2ZS1hYmNkZWYwMTIzNDU2Nzg5XCJ9In0=" // {"cfg": "{\"apiKey\": ...}"}
		number = "eyJhcGlLZXkiOiAxMjM0NTY3ODkwMTIzNDU2Nzg5MH0="                             // {"apiKey": 12345678901234567890}
	)
	for name, u := range map[string]string{
		"semicolon":    "https://h.example/mcp?api_key=" + dbPassword + ";v=1",
		"bad escape":   "https://h.example/mcp?api_key=" + dbPassword + "%zz",
		"repeated b64": "https://h.example/mcp?config=" + obj + "&config=" + obj,
		"escaped name": "https://h.example/mcp?c%21g=" + obj,
		"repeated key": "https://h.example/mcp?k=ntn_0123456789abcdefghijABCDE&k=1",
		"array":        "https://h.example/mcp?config=" + arr,
		"nested":       "https://h.example/mcp?config=" + nested,
		"number":       "https://h.example/mcp?config=" + number,
		"fragment":     "https://h.example/mcp#api_key=" + dbPassword,
		"plain json":   "https://h.example/mcp?config=" + url.QueryEscape(`{"apiKey":"sk-live-abcdef0123456789"}`),
	} {
		t.Run(name, func(t *testing.T) {
			input, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"r": map[string]any{"url": u}}})
			out, msgs := importYAML(t, string(input))
			if _, err := config.Load("mcpbox.yaml", []byte(out)); err != nil {
				t.Fatalf("output does not load: %v\n%s", err, out)
			}
			for _, secret := range []string{dbPassword, "sk-live-abcdef", "12345678901234567890", "ntn_0123456789", obj[:20], arr[:20], nested[:20], number[:20]} {
				if strings.Contains(out, secret) || strings.Contains(msgs, secret) {
					t.Errorf("%q copied:\n%s\n%s", secret, out, msgs)
				}
			}
		})
	}
}

// TestImportNotesClientVariablesAndRelativePaths: an argument with a
// client's own variable (VS Code's ${workspaceFolder}), which the client
// replaced before it ran the command, and a plain command's relative
// path, which it resolved against its own working directory, are named
// on the terminal: in the sandbox neither means what it did.
func TestImportNotesClientVariablesAndRelativePaths(t *testing.T) {
	_, msgs := importYAML(t, `{"servers": {
		"code": {"type": "stdio", "command": "my-server", "args": ["--root", "${workspaceFolder}"]},
		"script": {"command": "node", "args": ["./scripts/server.js", "--port=3000"]}}}`)
	for _, want := range []string{
		`server "code": argument "${workspaceFolder}" has ${...}, which the client replaced and mcpbox passes on literally`,
		`server "script": "./scripts/server.js": relative paths, which the client resolved against its own working directory`,
		"give the directory meant as filesystem.input or a mount",
	} {
		if !strings.Contains(msgs, want) {
			t.Errorf("notes without %q:\n%s", want, msgs)
		}
	}
	if strings.Contains(msgs, "--port") {
		t.Errorf("a flag named as a path:\n%s", msgs)
	}
}

// TestImportEnvCredentialsBeyondNames: env values that hold a key under a
// name the generic rule misses (AUTH, SESSION, a DSN, a pass) or that
// have a random key's shape become secrets; harmless values stay.
func TestImportEnvCredentialsBeyondNames(t *testing.T) {
	input := `{"mcpServers": {"s": {"command": "srv", "env": {
  "AUTH": "a8f5f167f44f4964e6c998dee827110ca8f5f167f44f4964",
  "SESSION": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
  "SENTRY_DSN": "https://abc123def456@o123.ingest.sentry.io/456",
  "DB_PASS": "hunter2",
  "OTHER": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
  "GIT_AUTHOR_NAME": "Alice",
  "PASSENGERS": "3",
  "LOG_LEVEL": "debug"
}}}}`
	cf, err := ParseClientFile("c.json", []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	if len(res.Config.Servers) != 1 {
		t.Fatalf("servers %v, notes %q", res.Config.Servers, res.Notes)
	}
	s := res.Config.Servers[0]
	var copied, secret []string
	for _, e := range s.Env {
		copied = append(copied, e.Name)
	}
	for _, sec := range s.Secrets {
		secret = append(secret, sec.Name)
	}
	slices.Sort(copied)
	slices.Sort(secret)
	if want := []string{"GIT_AUTHOR_NAME", "LOG_LEVEL", "PASSENGERS"}; !slices.Equal(copied, want) {
		t.Errorf("copied %q, want %q", copied, want)
	}
	if want := []string{"AUTH", "DB_PASS", "OTHER", "SENTRY_DSN", "SESSION"}; !slices.Equal(secret, want) {
		t.Errorf("secrets %q, want %q", secret, want)
	}
}

// TestImportLeavesMcpboxEntries: an entry that runs mcpbox already (a
// client set up with mcpbox run, or a config rewritten before) is not
// put into a sandbox, where it could not work: it is skipped with a
// note, and a rewritten client config keeps it.
func TestImportLeavesMcpboxEntries(t *testing.T) {
	input := `{"mcpServers": {
  "notes": {"command": "/usr/local/bin/mcpbox", "args": ["run", "--input", "/home/a/notes", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/workspace/input"]},
  "mcpbox": {"command": "mcpbox", "args": ["serve", "--config", "/home/a/mcpbox.yaml", "--stdio"]},
  "mem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
}}`
	cf, err := ParseClientFile("c.json", []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	if len(res.Config.Servers) != 1 || res.Config.Servers[0].Name != "mem" {
		t.Fatalf("servers %+v, want mem alone", res.Config.Servers)
	}
	if !slices.Equal(res.Skipped, []string{"notes", "mcpbox"}) {
		t.Errorf("Skipped = %q", res.Skipped)
	}
	if n := strings.Join(res.Notes, "\n"); !strings.Contains(n, `skipping server "notes": it runs mcpbox already (/usr/local/bin/mcpbox run); left as it is`) {
		t.Errorf("notes %q", res.Notes)
	}
}

// TestImportMaskedURLGetsNoOAuth: a remote URL whose credential import
// replaced by REDACTED is not turned into an OAuth server (its login
// could not work); the hint says to write the URL by hand.
func TestImportMaskedURLGetsNoOAuth(t *testing.T) {
	cf, err := ParseClientFile("c.json", []byte(`{"mcpServers": {
  "skl": {"url": "https://mcp.example.com/v1/sk_live_51Habcdefghijklmnopqrstuv/mcp"},
  "plain": {"url": "https://mcp.example.com/mcp"}
}}`))
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(cf, Host{})
	for _, s := range res.Config.Servers {
		switch s.Name {
		case "skl":
			if s.OAuth != nil || strings.Contains(s.URL, "sk_live_") {
				t.Errorf("skl: oauth %v, url %s; want no OAuth and the key masked", s.OAuth, s.URL)
			}
			if h := strings.Join(res.Hints["skl"], "\n"); !strings.Contains(h, "write the url by hand") {
				t.Errorf("skl's hints %q", h)
			}
		case "plain":
			if s.OAuth == nil {
				t.Errorf("plain: no OAuth")
			}
		}
	}
}

// TestClaudeCodeProjects: of ~/.claude.json, an import takes the user's
// servers and, only when asked, those of one project, which Claude Code
// runs only in that project's sessions; the others are named in notes.
func TestClaudeCodeProjects(t *testing.T) {
	const input = `{"numStartups": 3,
  "mcpServers": {"My Server!": {"command": "x"}, "shared": {"command": "s"}},
  "projects": {
    "/p1": {"mcpServers": {"dup": {"command": "d"}, "my-server": {"command": "y"}, "shared": {"command": "s"}}},
    "/p2": {"mcpServers": {"dup": {"command": "d"}, "secret-db": {"command": "db"}}},
    "/p3": {"allowedTools": []}}}`
	convert := func(t *testing.T, project string) (*ClientFile, *Result, string) {
		t.Helper()
		cf, err := ParseClientFile("claude.json", []byte(input))
		if err != nil {
			t.Fatal(err)
		}
		if got := cf.Projects(); !slices.Equal(got, []string{"/p1", "/p2"}) {
			t.Errorf("Projects() = %q, want /p1 and /p2 (/p3 has no servers)", got)
		}
		if project != "" {
			if err := cf.UseProject(project); err != nil {
				t.Fatal(err)
			}
		}
		res := Convert(cf, Host{})
		out, err := Render(res, "claude.json")
		if err != nil {
			t.Fatal(err)
		}
		return cf, res, string(out) + strings.Join(res.Notes, "\n")
	}
	names := func(res *Result) []string {
		var n []string
		for _, s := range res.Config.Servers {
			n = append(n, s.Name)
		}
		return n
	}
	leftOut := func(dir string) string {
		return "project " + dir + " has servers of its own, not imported"
	}

	t.Run("user servers only", func(t *testing.T) {
		_, res, out := convert(t, "")
		if got := names(res); !slices.Equal(got, []string{"my-server", "shared"}) {
			t.Errorf("servers %q, want only the user's my-server and shared", got)
		}
		for _, want := range []string{leftOut("/p1") + ` (Claude Code runs them only in its sessions): "dup", "my-server", "shared"; to import them, give --project /p1`,
			leftOut("/p2") + ` (Claude Code runs them only in its sessions): "dup", "secret-db"; to import them, give --project /p2`} {
			if !strings.Contains(out, want) {
				t.Errorf("no note %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "/p3") {
			t.Errorf("a project without servers is named:\n%s", out)
		}
	})
	t.Run("one project", func(t *testing.T) {
		cf, res, out := convert(t, "/p1/")
		// The user's "shared" repeated in /p1 is imported once; /p2's
		// servers stay out.
		if got := names(res); !slices.Equal(got, []string{"my-server", "shared", "dup", "my-server-2"}) {
			t.Errorf("servers %q, want the user's and /p1's, shared once", got)
		}
		for _, want := range []string{`server "my-server" (of project /p1) is called my-server-2 in mcpbox.yaml`, "# From the project /p1.", leftOut("/p2")} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, leftOut("/p1")) {
			t.Errorf("/p1 named as left out:\n%s", out)
		}
		_, notes, err := Rewrite(cf, RewriteOptions{Binary: "/bin/mcpbox", Config: "/c/mcpbox.yaml"})
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Join(notes, "\n"); !strings.Contains(n, "merge this mcpServers object into its project /p1 by hand") {
			t.Errorf("rewrite notes do not say where the entry goes: %q", notes)
		}
		if err := cf.UseProject("/p2"); err == nil {
			t.Error("a second project was taken into the same import")
		}
	})
	t.Run("unknown project", func(t *testing.T) {
		cf, err := ParseClientFile("claude.json", []byte(input))
		if err != nil {
			t.Fatal(err)
		}
		err = cf.UseProject("/p3")
		if err == nil || !strings.Contains(err.Error(), "no project /p3 with servers (it has: /p1, /p2)") {
			t.Errorf("UseProject(/p3) = %v, want an error naming the projects with servers", err)
		}
		plain, err := ParseClientFile("claude_desktop_config.json", []byte(`{"mcpServers": {"a": {"command": "a"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := plain.UseProject("/p1"); err == nil || !strings.Contains(err.Error(), "has no project with servers") {
			t.Errorf("UseProject on a file without projects = %v", err)
		}
	})
	t.Run("only project servers", func(t *testing.T) {
		cf, err := ParseClientFile("claude.json", []byte(`{"projects": {"/p": {"mcpServers": {"a": {"command": "a"}}}}}`))
		if err != nil {
			t.Fatalf("a file whose servers are all a project's: %v", err)
		}
		res := Convert(cf, Host{})
		if len(res.Config.Servers) != 0 || !strings.Contains(strings.Join(res.Notes, "\n"), "--project /p") {
			t.Errorf("servers %q, notes %q: want none, and a note naming --project /p", names(res), res.Notes)
		}
	})
}

// TestClaudeCodeProjectRules: with --project, Claude Code's rules for a
// project's session hold: its server replaces the user's of that name,
// the servers it disables (disabledMcpServers) are left out, a user's
// server repeated there (indented otherwise) is imported once; a key as
// written wins over one that matches only cleaned, several that match
// cleaned are an error, and a later spelling of the dir (its links
// resolved) is tried too. A hostile key is escaped in errors and quoted
// for the shell in the note that names the flag.
func TestClaudeCodeProjectRules(t *testing.T) {
	const input = `{
  "mcpServers": {
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
    "shared": {"command": "s", "args": ["a"]},
    "noisy": {"command": "n"}
  },
  "projects": {
    "/real/app": {
      "mcpServers": {
        "memory": {"command": "mem2"},
        "shared": {
          "args": ["a"],
          "command": "s"
        }
      },
      "disabledMcpServers": ["noisy"]
    },
    "/amb": {"mcpServers": {"a": {"command": "a"}}},
    "/amb/": {"mcpServers": {"b": {"command": "b"}}},
    "/x; touch /tmp/pwned\n": {"mcpServers": {"h": {"command": "h"}}}
  }
}`
	parse := func(t *testing.T) *ClientFile {
		t.Helper()
		cf, err := ParseClientFile("claude.json", []byte(input))
		if err != nil {
			t.Fatal(err)
		}
		return cf
	}
	cf := parse(t)
	if err := cf.UseProject("/link/app", "/real/app"); err != nil {
		t.Fatalf("UseProject(a link, then its target): %v", err)
	}
	res := Convert(cf, Host{})
	var got []string
	for _, s := range res.Config.Servers {
		got = append(got, s.Name+"="+strings.Join(s.Command, " "))
	}
	if want := []string{"memory=mem2", "shared=s a"}; !slices.Equal(got, want) {
		t.Errorf("servers %q, want %q: the project's memory, shared once, noisy disabled", got, want)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{`server "memory" of project /real/app replaces the user's server of that name`,
		`skipping server "noisy": project /real/app disables it (disabledMcpServers)`,
		`to import them, give --project '/x; touch /tmp/pwned\n'`} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}

	cf = parse(t)
	if err := cf.UseProject("/amb/"); err != nil || !slices.ContainsFunc(Convert(cf, Host{}).Config.Servers, func(s *config.Server) bool { return s.Name == "b" }) {
		t.Errorf("UseProject(/amb/): %v; want the servers of the key written so", err)
	}
	err := parse(t).UseProject("/amb//")
	if err == nil || !strings.Contains(err.Error(), `names several projects ("/amb", "/amb/")`) {
		t.Errorf("UseProject(/amb//) = %v, want both keys named", err)
	}
	err = parse(t).UseProject("/nowhere")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), `/x; touch /tmp/pwned\n`) {
		t.Errorf("UseProject(/nowhere) = %q, want the projects listed on one line", err)
	}
}
