package config

import (
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
	c, err := Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range Warnings(c) {
		got = append(got, w.Error())
	}
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
// to add, while any tools: that can expose something stays quiet.
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
`
	c, err := Load("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range Warnings(c) {
		got = append(got, w.Error())
	}
	want := []string{
		`t.yaml:3:3: servers.github: no tools: key, so every tool is hidden (default deny); add  tools: {allow: ["*"]}  to expose them`,
		`t.yaml:7:12: servers.denyonly.tools: allows no tool (no allow, approve, allowing rule or default), so every tool is hidden; add  allow: ["*"]  or the tools to expose`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("warnings (-want +got):\n%s", diff)
	}
}
