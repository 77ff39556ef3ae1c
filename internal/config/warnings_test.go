package config

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWarnings(t *testing.T) {
	src := `version: 1
servers:
  a:
    command: [x]
    env: {GITHUB_TOKEN: ghp_plain, LOG_LEVEL: info}
    secrets:
      T: {from: env:SHARED_TOKEN}
    network:
      egress: [{host: "*"}, {host: api.example.com}, {host: "*.com"}]
  b:
    command: [y]
    secrets:
      U: {from: env:SHARED_TOKEN}
`
	got := warningsOf(t, src)
	want := []string{
		`t.yaml:3:3: servers.a: no tools: key, so every tool is hidden (default deny); add  tools: {allow: ["*"]}  to expose them`,
		`t.yaml:5:11: servers.a.env.GITHUB_TOKEN: looks like a credential in plain config; use secrets: {GITHUB_TOKEN: {from: env:VAR | file:PATH | cmd:COMMAND}}`,
		`t.yaml:9:16: servers.a.network.egress[0]: allows any host; the server holds secrets it could send there`,
		`t.yaml:9:54: servers.a.network.egress[2]: allows every name below com; the server holds secrets it could send there`,
		`t.yaml:10:3: servers.b: no tools: key, so every tool is hidden (default deny); add  tools: {allow: ["*"]}  to expose them`,
		`t.yaml:13:7: servers.b.secrets.U: env:SHARED_TOKEN is also given to server a; give each server its own credential`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("warnings (-want +got):\n%s", diff)
	}
	clean, err := Load("c.yaml", []byte("version: 1\nservers:\n  a:\n    command: [x]\n    secrets: {T: {from: env:X}}\n    network: {egress: [{host: api.example.com}]}\n    tools: {allow: [x]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := Warnings(clean); len(w) != 0 {
		t.Fatalf("warnings for a clean config: %v", w)
	}
}

// TestWarningsNoTools: a server without tools: (or with a tools: that
// allows nothing) exposes nothing; the warning says so and names the line
// to add, while any tools: that can expose something stays quiet; deny:
// ["*"] hides every tool whatever allow says, unless a rule lets one by.
func TestWarningsNoTools(t *testing.T) {
	src := `version: 1
servers:
  github:
    command: [gh]
  denyonly:
    command: [x]
    tools: {deny: [a], rules: [{tool: b, action: deny}]}
  allowed:
    command: [x]
    tools: {allow: [a]}
  approved:
    command: [x]
    tools: {approve: ["*"]}
  ruled:
    command: [x]
    tools: {rules: [{tool: "*", when: 'args.x == "y"', action: allow}]}
  defaulted:
    command: [x]
    tools: {default: approve}
  denyall:
    command: [x]
    tools: {allow: ["*"], deny: ["*"]}
  denyallbutrule:
    command: [x]
    tools: {deny: ["*"], rules: [{tool: read, action: allow}]}
`
	got := warningsOf(t, src)
	want := []string{
		`t.yaml:3:3: servers.github: no tools: key, so every tool is hidden (default deny); add  tools: {allow: ["*"]}  to expose them`,
		`t.yaml:7:12: servers.denyonly.tools: allows no tool (no allow, approve, allowing rule or default), so every tool is hidden; add  allow: ["*"]  or the tools to expose`,
		`t.yaml:22:12: servers.denyall.tools: deny: ["*"] refuses every tool before allow, approve or the default is read, so every tool is hidden; name the tools to deny instead`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("warnings (-want +got):\n%s", diff)
	}
}

// TestCredentialName: the one list of credential-like names, which both
// Warnings and the importer use. The importer's list was already this
// one; Warnings used to match only TOKEN, SECRET, PASSWORD, PASSWD,
// API_KEY, APIKEY, PRIVATE_KEY, ACCESS_KEY and CREDENTIAL, so the names
// marked "new" did not draw the plain-env warning before.
func TestCredentialName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"GITHUB_TOKEN", true},
		{"client_secret", true},
		{"DB_PASSWORD", true},
		{"MYSQL_PASSWD", true},
		{"BRAVE_API_KEY", true},
		{"STRIPE_APIKEY", true},
		{"AWS_ACCESS_KEY_ID", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", true},
		{"OPENAI_KEY", true},      // new: KEY anywhere, not only API_KEY and the like
		{"SSH_KEY", true},         // new
		{"SIGNING_KEY", true},     // new
		{"apiKey", true},          // new (a URL query parameter)
		{"--api-key", true},       // new (a flag: the hyphen is no underscore)
		{"KEYBOARD_LAYOUT", true}, // new, a false positive: a needless warning costs less than a missed key
		{"GITHUB_PAT", true},      // new: a personal access token
		{"PAT", true},             // new
		{"pat-token", true},
		{"PATH", false},
		{"PYTHONPATH", false},
		{"PATTERN", false},
		{"DISPATCH_MODE", false},
		{"LOG_LEVEL", false},
		{"TZ", false},
	}
	for _, tt := range tests {
		if got := CredentialName(tt.name); got != tt.want {
			t.Errorf("CredentialName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestWarningsCredentialNames: the plain-env warning follows
// CredentialName, including the names it gained from the importer's list,
// and stays quiet on an empty value.
func TestWarningsCredentialNames(t *testing.T) {
	src := `version: 1
servers:
  a:
    command: [x]
    tools: {allow: ["*"]}
    env: {OPENAI_KEY: sk-x, GITHUB_PAT: p, PATH: /usr/bin, PATTERN: "*.go", SSH_KEY: ""}
`
	got := warningsOf(t, src)
	want := []string{
		`t.yaml:6:11: servers.a.env.OPENAI_KEY: looks like a credential in plain config; use secrets: {OPENAI_KEY: {from: env:VAR | file:PATH | cmd:COMMAND}}`,
		`t.yaml:6:29: servers.a.env.GITHUB_PAT: looks like a credential in plain config; use secrets: {GITHUB_PAT: {from: env:VAR | file:PATH | cmd:COMMAND}}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("warnings (-want +got):\n%s", diff)
	}
}

// TestWarningsKubeAgent: a kubernetes server that runs the agent from
// its image at the default path is flagged; agent_image, an explicit
// agent_path, a url server and a local override are not.
func TestWarningsKubeAgent(t *testing.T) {
	src := kubeTop + `  image: r/base@sha256:` + digest + `
  gateway_cidrs: [10.0.0.0/8]
servers:
  plain: {command: [srv], tools: {allow: ["*"]}}
  copied: {command: [srv], tools: {allow: ["*"]}, backend: {agent_image: r/agent@sha256:` + digest + `}}
  derived: {command: [srv], tools: {allow: ["*"]}, backend: {agent_path: /app/mcpbox}}
  here: {command: [srv], tools: {allow: ["*"]}, backend: {kind: local}}
  remote: {url: "https://x.example/mcp", tools: {allow: ["*"]}}
`
	got := warningsOf(t, src)
	want := []string{`t.yaml:9:3: servers.plain: its pod runs the agent from its image at /usr/local/bin/mcpbox, which no stock image has; set backend.agent_image (an image with mcpbox) to copy the agent in, or backend.agent_path if the image has it`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestWarningsKubeTags: each image a server's pods run by tag is flagged
// once, where it is set (agent_image, image, base_images, an image
// server's own), and not when pinned by digest or on this host (where
// mcpbox.lock pins it).
func TestWarningsKubeTags(t *testing.T) {
	src := kubeTop + `  image: r/base:1
  agent_image: r/agent:1
  base_images: {npm: r/node:22}
servers:
  cmd1: {command: [srv], tools: {allow: ["*"]}}
  cmd2: {command: [srv], tools: {allow: ["*"]}}
  img: {image: r/img:2, args: [/srv], tools: {allow: ["*"]}, backend: {agent_image: "r/agent@sha256:` + digest + `"}}
  pkg: {package: "npm:x@1.0.0", tools: {allow: ["*"]}}
  pinned: {image: "r/img@sha256:` + digest + `", args: [/srv], tools: {allow: ["*"]}}
  here: {image: r/here:1, args: [/srv], tools: {allow: ["*"]}, backend: {kind: local}}
`
	var got []string
	for _, w := range warningsOf(t, src) {
		if strings.Contains(w, "is a tag") {
			got = append(got, w[:strings.Index(w, " is a tag")])
		}
	}
	want := []string{"t.yaml:6:10: backend.image r/base:1", "t.yaml:7:16: backend.agent_image r/agent:1",
		"t.yaml:8:16: backend.base_images.npm r/node:22", "t.yaml:12:16: servers.img.image r/img:2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tag warnings (-want +got):\n%s", diff)
	}
}

// TestWarningsKubeOutside: a backend reached through a kubeconfig with
// no gateway_cidrs is flagged once per kubeconfig and namespace; one in
// the cluster, or with gateway_cidrs, is not.
func TestWarningsKubeOutside(t *testing.T) {
	src := kubeTop + `  image: "r/base@sha256:` + digest + `"
  agent_image: "r/agent@sha256:` + digest + `"
servers:
  a: {command: [srv], tools: {allow: ["*"]}}
  b: {command: [srv], tools: {allow: ["*"]}}
  c: {command: [srv], tools: {allow: ["*"]}, backend: {namespace: other, gateway_cidrs: [10.0.0.0/8]}}
  d: {command: [srv], tools: {allow: ["*"]}, backend: {kubeconfig: /k/other}}
  e: {command: [srv], tools: {allow: ["*"]}, backend: {in_cluster: true}}
`
	var got []string
	for _, w := range warningsOf(t, src) {
		if strings.Contains(w, "gateway_cidrs") {
			got = append(got, w[:strings.Index(w, ": backend:")])
		}
	}
	if diff := cmp.Diff([]string{"t.yaml:5:15", "t.yaml:12:68"}, got); diff != "" {
		t.Errorf("gateway_cidrs warnings at (-want +got):\n%s", diff)
	}
}

// digest is a well-formed sha256 digest for image references in tests.
var digest = strings.Repeat("ab", 32)

// warningsOf loads src as t.yaml and returns its warnings as strings.
func warningsOf(t *testing.T, src string) []string {
	t.Helper()
	c, err := Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range Warnings(c) {
		got = append(got, w.Error())
	}
	return got
}

// TestWarnTemplateFixedOutput: a template beside a fixed output dir seeds
// nothing, and policy check says so; with output: {} it is quiet.
func TestWarnTemplateFixedOutput(t *testing.T) {
	got := warningsOf(t, "version: 1\nservers:\n  a:\n    command: [x]\n    tools: {allow: ['*']}\n    filesystem: {output: {source: ./out}, template: ./tmpl}\n")
	want := []string{"t.yaml:6:53: servers.a.filesystem.template: seeds only the workspaces made per scope (output: {}); with output.source ./out it is not used: copy its files there yourself, or drop output.source"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if got := warningsOf(t, "version: 1\nservers:\n  a:\n    command: [x]\n    tools: {allow: ['*']}\n    filesystem: {output: {}, template: ./tmpl}\n"); len(got) != 0 {
		t.Errorf("a template of workspaces warns: %q", got)
	}
}

// TestEncodedCredentials: the credentials inside JSON, or base64 of JSON,
// are found by key name or shape, in arrays, in JSON held in a string, and
// as numbers with every digit; other JSON and other strings give none.
func TestEncodedCredentials(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	shaped := func(s string) bool { return strings.HasPrefix(s, "tok_") }
	for _, c := range []struct {
		in   string
		want []string
	}{
		{b64(`{"apiKey":"k-0123456789","profile":"work"}`), []string{"k-0123456789"}},
		{`{"apiKey":"k-0123456789"}`, []string{"k-0123456789"}},
		{b64(`[{"token":"t-0123456789"}]`), []string{"t-0123456789"}},
		{b64(`{"cfg":"{\"secret\":\"s-0123456789\"}"}`), []string{"s-0123456789"}},
		{b64(`{"apiKey":12345678901234567890}`), []string{"12345678901234567890"}},
		{b64(`{"x":"tok_abc","y":"Bearer abcdefghijklmnop1234"}`), []string{"tok_abc", "Bearer abcdefghijklmnop1234"}},
		{b64(`{"theme":"dark"}`), nil},
		{"plain-value", nil},
		{b64(`"apiKey"`), nil},
		{"", nil},
	} {
		got := EncodedCredentials(c.in, shaped)
		slices.Sort(got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("EncodedCredentials(%q) = %q, want %q", c.in, got, want)
		}
	}
}

// TestWarningsClientGlobs: a client's glob whose server part names no
// server of the config (a typo, a renamed server), or that has no "/"
// at all, matches nothing and is flagged; globs over real servers are
// not.
func TestWarningsClientGlobs(t *testing.T) {
	src := `version: 1
clients:
  - name: alice
    token: {from: env:A}
    tools:
      allow: ["github/*", "nosuchserver/*", "git*/read_*", "read_file"]
      deny: ["gitlab/*"]
servers:
  github:
    command: [x]
    tools: {allow: ["*"]}
  files:
    command: [y]
    tools: {allow: ["*"]}
`
	want := []string{
		`t.yaml:6:27: clients[0].tools.allow[1]: "nosuchserver/*" matches no server of this config (github, files)`,
		`t.yaml:6:60: clients[0].tools.allow[3]: "read_file" has no "/", so it matches no SERVER/TOOL; write SERVER/TOOL (e.g. */read_file)`,
		`t.yaml:7:14: clients[0].tools.deny[0]: "gitlab/*" matches no server of this config (github, files)`,
	}
	if diff := cmp.Diff(want, warningsOf(t, src)); diff != "" {
		t.Fatalf("warnings (-want +got):\n%s", diff)
	}
}

// TestWarningsNoOutput: a server that names /workspace/output in its env,
// command or args without a filesystem.output is told that its sandbox
// has no such dir (the server met ENOENT, and serve said nothing); one
// with an output, a remote one and a path merely starting alike are not.
func TestWarningsNoOutput(t *testing.T) {
	src := `version: 1
servers:
  mem:
    package: npm:@modelcontextprotocol/server-memory@2025.1.1
    env: {MEMORY_FILE_PATH: /workspace/output/memory.jsonl, OTHER: /workspace/outputs, FLAG: --dir=/workspace/outputs}
    tools: {allow: ["*"]}
  fs:
    command: [srv, --out=/workspace/output, /workspace/input]
    tools: {allow: ["*"]}
  ok:
    command: [srv, /workspace/output]
    filesystem: {output: {}}
    tools: {allow: ["*"]}
`
	want := []string{
		`t.yaml:5:11: servers.mem.env.MEMORY_FILE_PATH: names /workspace/output, which its sandbox has only with filesystem.output; add  filesystem: {output: {}}`,
		`t.yaml:8:20: servers.fs.command[1]: names /workspace/output, which its sandbox has only with filesystem.output; add  filesystem: {output: {}}`,
	}
	if diff := cmp.Diff(want, warningsOf(t, src)); diff != "" {
		t.Fatalf("warnings (-want +got):\n%s", diff)
	}
}
