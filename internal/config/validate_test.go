package config

import (
	"maps"
	"strings"
	"testing"
)

// mountAt puts a mount with the given flow-mapping fields on line 7; the
// value of "target" starts at column 34 when source is /srv.
func mountAt(fields string) string {
	return base + "    filesystem:\n      mounts:\n        - {source: /srv, " + fields + "}\n"
}

// egressAt puts one egress rule on line 7, its first value at column 18.
func egressAt(rule string) string {
	return base + "    network:\n      egress:\n        - {" + rule + "}\n"
}

func forwardAt(rule string) string {
	return base + "    network:\n      forward:\n        - {" + rule + "}\n"
}

// TestLoadInvalid checks the exact first error, so that the line and column
// of each kind of error are checked too. Columns are counted by hand.
func TestLoadInvalid(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		// Syntax and shape.
		{"empty", "", `t.yaml:1:1: empty config file (want a mapping starting with version: 1)`},
		{"comments only", "# nothing\n", `t.yaml:1:1: empty config file (want a mapping starting with version: 1)`},
		{"explicit null document", "---\n", `t.yaml:1:1: empty config file (want a mapping starting with version: 1)`},
		{"list at top", "- a\n- b\n", `t.yaml:1:1: config must be a mapping, got a list`},
		{"scalar at top", "hello\n", `t.yaml:1:1: config must be a mapping, got a string`},
		{"syntax error", "version: 1\n\tservers: x\n", `t.yaml:2:1: invalid YAML: found a tab character that violates indentation (while scanning a plain scalar that starts at line 1, column 10)`},
		{"tab indent", "version: 1\nservers:\n\ts: {command: [x]}\n", `t.yaml:3:1: invalid YAML: found character that cannot start any token; the line is indented with a tab: YAML indents with spaces`},
		{"bare star", "version: 1\nservers:\n  s:\n    command: [x]\n    tools: {allow: [*]}\n", `t.yaml:5:22: invalid YAML: did not find expected alphabetic or numeric character (while scanning an alias that starts at line 5, column 21); a bare * starts a YAML alias: quote it ("*")`},
		{"a client's config", `{"mcpServers": {"a": {"command": "x"}}}`, `t.yaml:1:2: unknown top-level key "mcpServers"; this is an MCP client's config (Claude Desktop, Cursor): mcpbox import FILE turns it into an mcpbox config`},
		{"unclosed list", "version: 1\nservers: [\n", `t.yaml:3:1: invalid YAML: did not find expected node content at the end of the file`},
		{"two documents", "version: 1\n---\nversion: 1\n", `t.yaml:2:1: more than one YAML document; want exactly one`},
		{"unknown top-level key", base + "foo: 1\n", `t.yaml:5:1: unknown top-level key "foo"`},
		{"unknown key with suggestion", base + "    limits: {memroy: 1Gi}\n", `t.yaml:5:14: unknown key "memroy" in servers.s.limits; did you mean "memory"?`},
		{"unknown key, nothing close", base + "    limits: {ram: 1Gi}\n", `t.yaml:5:14: unknown key "ram" in servers.s.limits`},
		{"suggestion at top level", "versoin: 1\n", `t.yaml:1:1: unknown top-level key "versoin"; did you mean "version"?`},
		{"duplicate key", "version: 1\nversion: 1\n", `t.yaml:2:1: duplicate key "version" in the top level (first at line 1)`},
		{"duplicate server", base + "  s:\n    command: [x]\n", `t.yaml:5:3: duplicate key "s" in servers (first at line 3)`},
		{"version as string", "version: \"1\"\nservers: {s: {command: [srv]}}\n", `t.yaml:1:10: version: expected an integer, got a string`},
		{"int where string", base + "    pin: 1\n", `t.yaml:5:10: servers.s.pin: expected a string, got an integer`},
		{"wrong type", base + "    limits: {pids: lots}\n", `t.yaml:5:20: servers.s.limits.pids: expected an integer, got a string`},
		{"command as string", "version: 1\nservers:\n  s:\n    command: srv --stdio\n", `t.yaml:4:14: servers.s.command: expected a list, got a string; write it as a list, one element per argument: [PROGRAM, ARG, ...]`},
		{"args as string", "version: 1\nservers:\n  s:\n    command: [srv]\n    args: --stdio\n", `t.yaml:5:11: servers.s.args: expected a list, got a string; write it as a list, one element per argument: [ARG, ...] (the program is command:, or the package's own)`},
		{"allow as string", "version: 1\nservers:\n  s:\n    command: [srv]\n    tools: {allow: \"*\"}\n", `t.yaml:5:20: servers.s.tools.allow: expected a list, got a string; write it as a list of tool names or globs: ["*"]`},
		{"mapping where list", base + "    exec: {allow: {a: b}}\n", `t.yaml:5:19: servers.s.exec.allow: expected a list, got a mapping`},
		{"list where mapping", base + "    limits: [1]\n", `t.yaml:5:13: servers.s.limits: expected a mapping, got a list`},
		{"bad size unit", base + "    limits: {memory: 12x}\n", `t.yaml:5:22: servers.s.limits.memory: invalid size "12x": unknown unit "x" (want Ki, Mi, Gi, Ti, Pi, Ei or k, M, G, T, P, E)`},
		{"negative size", base + "    limits: {memory: -1Mi}\n", `t.yaml:5:22: servers.s.limits.memory: invalid size "-1Mi": must not be negative`},
		{"overflowing size", base + "    limits: {output: 9000Pi}\n", `t.yaml:5:22: servers.s.limits.output: invalid size "9000Pi": too large`},
		{"bad duration", base + "    lifecycle: {idle: 10 minutes}\n", `t.yaml:5:23: servers.s.lifecycle.idle: invalid duration "10 minutes" (want e.g. 30s, 10m, 1h)`},
		{"negative duration", base + "    lifecycle: {idle: -5m}\n", `t.yaml:5:23: servers.s.lifecycle.idle: invalid duration "-5m": must not be negative`},
		{"nan cpu", base + "    limits: {cpu: .nan}\n", `t.yaml:5:19: servers.s.limits.cpu: expected a finite number, got .nan`},
		{"bool not yes", "audit: {include_payloads: yes}\n" + base, `t.yaml:1:27: audit.include_payloads: expected true or false, got a string`},
		{"alias", "version: 1\nservers:\n  s:\n    command: &c [srv]\n  t:\n    command: *c\n", `t.yaml:6:14: servers.t.command: aliases (*c) are not supported`},
		{"merge key", "version: 1\n<<: {version: 1}\n", `t.yaml:2:1: the top level: merge keys (<<) are not supported`},
		{"custom tag on mapping", base + "    limits: !big {memory: 1Gi}\n", `t.yaml:5:13: servers.s.limits: expected a mapping, got a value tagged !big`},
		{"custom tag on list", base + "    exec: {allow: !paths [/a]}\n", `t.yaml:5:19: servers.s.exec.allow: expected a list, got a value tagged !paths`},
		{"binary scalar", base + "    pin: !!binary dG9mdQ==\n", `t.yaml:5:10: servers.s.pin: expected a string, got binary data`},
		{"null list", base + "    sandbox: {require: ~}\n", `t.yaml:5:24: servers.s.sandbox.require: expected a list, got nothing (null)`},
		{"secret value instead of mapping", base + "    secrets: {TOKEN: ghp_abcdef}\n", `t.yaml:5:22: servers.s.secrets.TOKEN: expected a mapping such as {from: env:VAR}; secret values never go in the config, only references (env:VAR, file:PATH, cmd:COMMAND)`},

		// Top level semantics.
		{"missing version", "servers:\n  s:\n    command: [srv]\n", `t.yaml:1:1: missing version (want version: 1)`},
		{"version 2", "version: 2\nservers:\n  s: {command: [s]}\n", `t.yaml:1:10: version: unsupported version 2 (want 1)`},
		{"no servers", "version: 1\n", `t.yaml:1:1: servers: no servers configured`},
		{"empty servers", "version: 1\nservers: {}\n", `t.yaml:2:10: servers: no servers configured`},
		{"empty state_dir", base + "state_dir: \"\"\n", `t.yaml:5:12: state_dir: must not be empty`},
		{"listen beyond loopback", base + "listen: {http: {addr: 0.0.0.0:8765}}\n", `t.yaml:5:23: listen.http.addr: "0.0.0.0:8765" is not a loopback address; listening beyond loopback needs clients with tokens`},
		{"listen bad port", base + "listen: {http: {addr: 'localhost:99999'}}\n", `t.yaml:5:23: listen.http.addr: invalid port "99999" (want 0-65535)`},
		{"tls cert only", base + "listen: {http: {tls: {cert: c.pem}}}\n", `t.yaml:5:29: listen.http.tls: cert needs a key`},
		{"origin star", base + "listen: {http: {allowed_origins: [\"*\"]}}\n", `t.yaml:5:35: listen.http.allowed_origins[0]: "*" would let any web page call the gateway; list origins`},
		{"origin with path", base + "listen: {http: {allowed_origins: [\"http://a.example/x\"]}}\n", `t.yaml:5:35: listen.http.allowed_origins[0]: invalid origin "http://a.example/x": bad host "a.example/x"`},
		{"client token literal", base + "clients: [{name: a, token: {from: hunter2}}]\n", `t.yaml:5:35: clients[0].token.from: must be a reference (env:VAR, file:PATH or cmd:COMMAND), not a literal secret value`},
		{"client token missing", base + "clients: [{name: a}]\n", `t.yaml:5:11: clients[0].token.from: missing token reference (env:VAR, file:PATH or cmd:COMMAND)`},
		{"client role", base + "clients: [{name: a, token: {from: env:T}, role: root}]\n", `t.yaml:5:49: clients[0].role: "root" is no dashboard role (want admin or viewer)`},
		{"client duplicate", base + "clients: [{name: a, token: {from: env:A}}, {name: a, token: {from: env:B}}]\n", `t.yaml:5:51: clients[1].name: duplicate client name "a"`},
		{"approval channel", base + "approvals: {channels: [email]}\n", `t.yaml:5:24: approvals.channels[0]: unknown channel "email" (want elicitation, cli or web)`},
		{"audit store", base + "audit: {store: postgres}\n", `t.yaml:5:16: audit.store: unknown store "postgres" (want sqlite)`},
		{"audit on_failure", base + "audit: {on_failure: ignore}\n", `t.yaml:5:21: audit.on_failure: unknown value "ignore" (want refuse or allow)`},
		{"audit jsonl name", base + "audit: {jsonl: ~/.bashrc}\n", `t.yaml:5:16: audit.jsonl: "~/.bashrc": the name must end in .jsonl (the records hold names a client chooses: no other program may run or read them as its own)`},
		{"top-level layer", base + "sandbox: {require: [netns, netns]}\n", `t.yaml:5:28: sandbox.require[1]: duplicate layer "netns"`},
		{"warm pool negative", base + "sandbox: {warm_pool: -1}\n", `t.yaml:5:22: sandbox.warm_pool: -1 is out of range (0 to 64)`},
		{"warm pool too big", base + "sandbox: {warm_pool: 65}\n", `t.yaml:5:22: sandbox.warm_pool: 65 is out of range (0 to 64)`},

		// Servers.
		{"bad server name", "version: 1\nservers:\n  GitHub:\n    command: [srv]\n", `t.yaml:3:3: servers: invalid server name "GitHub" (want ^[a-z0-9][a-z0-9_-]{0,62}$)`},
		{"command and url", base + "    url: https://x.example/mcp\n", `t.yaml:5:10: servers.s: command and url are exclusive (local server or remote server)`},
		{"neither command nor url", "version: 1\nservers:\n  s: {}\n", `t.yaml:3:3: servers.s: needs a command (local server), a url (remote server) or builtin`},
		{"empty command", "version: 1\nservers:\n  s:\n    command: []\n", `t.yaml:4:14: servers.s.command: must not be empty`},
		{"empty program", "version: 1\nservers:\n  s:\n    command: ['', x]\n", `t.yaml:4:15: servers.s.command[0]: program must not be empty`},
		{"bad placement", base + "    placement: sandboxed\n", `t.yaml:5:16: servers.s.placement: invalid value "sandboxed" (want isolated, group:NAME or remote)`},
		{"bad group", base + "    placement: group:Bad\n", `t.yaml:5:16: servers.s.placement: invalid group name "Bad" (want ^[a-z0-9][a-z0-9_-]{0,62}$)`},
		{"remote with command", base + "    placement: remote\n", `t.yaml:5:16: servers.s.placement: a remote server has a url, not a command`},
		{"url with isolated", "version: 1\nservers:\n  r:\n    url: https://mcp.example.com/mcp\n    placement: isolated\n", `t.yaml:5:16: servers.r.placement: a server with a url runs outside any sandbox; use placement: remote`},
		{"url plain http", "version: 1\nservers:\n  r:\n    url: http://mcp.example.com/mcp\n", `t.yaml:4:10: servers.r.url: plain http is only allowed to a loopback host; use https`},
		{"url credentials", "version: 1\nservers:\n  r:\n    url: https://u:p@mcp.example.com/\n", `t.yaml:4:10: servers.r.url: must not contain credentials; use secrets`},
		{"url scheme", "version: 1\nservers:\n  r:\n    url: ftp://mcp.example.com/\n", `t.yaml:4:10: servers.r.url: unsupported scheme "ftp" (want https)`},
		{"remote with filesystem", "version: 1\nservers:\n  r:\n    url: https://mcp.example.com/\n    filesystem: {tmp: {size: 1Mi}}\n", `t.yaml:5:17: servers.r.filesystem: does not apply to a remote server (it runs outside any sandbox)`},
		{"remote with memory limit", "version: 1\nservers:\n  r:\n    url: https://mcp.example.com/\n    limits: {memory: 1Gi}\n", `t.yaml:5:22: servers.r.limits.memory: does not apply to a remote server (it runs outside any sandbox)`},
		{"bad scope", base + "    scope: global\n", `t.yaml:5:12: servers.s.scope: invalid value "global" (want agent, session or shared)`},
		{"input without source", base + "    filesystem: {input: {mode: ro}}\n", `t.yaml:5:25: servers.s.filesystem.input.source: must not be empty`},
		{"input mode rw", base + "    filesystem: {input: {source: ., mode: rw}}\n", `t.yaml:5:43: servers.s.filesystem.input.mode: invalid value "rw" (want ro or overlay)`},
		{"tmp size zero", base + "    filesystem: {tmp: {size: 0}}\n", `t.yaml:5:30: servers.s.filesystem.tmp.size: must be positive (leave it out for the default)`},
		{"output size zero", base + "    filesystem: {output: {size: 0}}\n", `t.yaml:5:33: servers.s.filesystem.output.size: must be positive (leave it out for the default)`},
		{"output size unit", base + "    filesystem: {output: {size: 1g}}\n", `t.yaml:5:33: servers.s.filesystem.output.size: invalid size "1g": unknown unit "g" (want Ki, Mi, Gi, Ti, Pi, Ei or k, M, G, T, P, E)`},
		{"input size read-only", base + "    filesystem: {input: {source: ., size: 1Gi}}\n", `t.yaml:5:43: servers.s.filesystem.input.size: bounds the changes of mode overlay; a read-only input takes none`},
		{"mount relative", mountAt("target: data"), `t.yaml:7:34: servers.s.filesystem.mounts[0].target: "data" is not an absolute path`},
		{"mount unclean", mountAt("target: /data/../etc"), `t.yaml:7:34: servers.s.filesystem.mounts[0].target: "/data/../etc" is not clean (want "/etc")`},
		{"mount trailing slash", mountAt("target: /data/"), `t.yaml:7:34: servers.s.filesystem.mounts[0].target: "/data/" is not clean (want "/data")`},
		{"mount root", mountAt("target: /"), `t.yaml:7:34: servers.s.filesystem.mounts[0].target: must not be /`},
		{"mount proc", mountAt("target: /proc/sys"), `t.yaml:7:34: servers.s.filesystem.mounts[0].target: /proc/sys is under /proc, a kernel filesystem`},
		{"mount dev", mountAt("target: /dev"), `t.yaml:7:34: servers.s.filesystem.mounts[0].target: /dev is under /dev, a kernel filesystem`},
		{"mount above input", mountAt("target: /workspace"), `t.yaml:7:34: servers.s.filesystem.mounts[0].target: /workspace overlaps /workspace/input, which the sandbox provides`},
		{"mount below usr", mountAt("target: /usr/local"), `t.yaml:7:34: servers.s.filesystem.mounts[0].target: /usr/local overlaps /usr, which the sandbox provides`},
		{"mount above secrets", mountAt("target: /run"), `t.yaml:7:34: servers.s.filesystem.mounts[0].target: /run overlaps /run/secrets, which the sandbox provides`},
		{"mount tmp", mountAt("target: /tmp/home"), `t.yaml:7:34: servers.s.filesystem.mounts[0].target: /tmp/home overlaps /tmp, which the sandbox provides`},
		{"mount mode", mountAt("target: /data, mode: rwx"), `t.yaml:7:47: servers.s.filesystem.mounts[0].mode: invalid value "rwx" (want ro or rw)`},
		{"mount git", mountAt("target: /data, mode: rw, git: yes"), `t.yaml:7:56: servers.s.filesystem.mounts[0].git: invalid value "yes" (want ro or rw)`},
		{"mount git read-only", mountAt("target: /data, git: rw"), `t.yaml:7:46: servers.s.filesystem.mounts[0].git: rw needs mode: rw (a read-only mount's .git is read-only too)`},
		{"mount twice", base + "    filesystem:\n      mounts:\n        - {source: /a, target: /data}\n        - {source: /b, target: /data}\n", `t.yaml:8:32: servers.s.filesystem.mounts[1].target: /data is already mounted`},
		{"mount nested", base + "    filesystem:\n      mounts:\n        - {source: /a, target: /opt/srv}\n        - {source: /b, target: /opt/srv/node_modules}\n", `t.yaml:8:32: servers.s.filesystem.mounts[1].target: /opt/srv/node_modules and mounts[0]'s /opt/srv lie one inside the other; nested mounts are not supported: mount them side by side`},
		{"mount nested above", base + "    filesystem:\n      mounts:\n        - {source: /a, target: /opt/srv/x}\n        - {source: /b, target: /opt/srv}\n", `t.yaml:8:32: servers.s.filesystem.mounts[1].target: /opt/srv and mounts[0]'s /opt/srv/x lie one inside the other; nested mounts are not supported: mount them side by side`},
		{"env name with =", base + "    env: {\"A=B\": x}\n", `t.yaml:5:11: servers.s.env: invalid variable name "A=B" (must be non-empty, without = or NUL)`},
		{"env null value", base + "    env: {A: ~}\n", `t.yaml:5:14: servers.s.env.A: expected a string, got nothing (null)`},
		{"secret literal from", base + "    secrets:\n      TOKEN: {from: ghp_123456}\n", `t.yaml:6:21: servers.s.secrets.TOKEN.from: must be a reference (env:VAR, file:PATH or cmd:COMMAND), not a literal secret value`},
		{"secret empty env ref", base + "    secrets:\n      TOKEN: {from: 'env:'}\n", `t.yaml:6:21: servers.s.secrets.TOKEN.from: env: reference names nothing`},
		{"secret missing from", base + "    secrets:\n      TOKEN: {as: file}\n", `t.yaml:6:7: servers.s.secrets.TOKEN.from: missing reference (env:VAR, file:PATH or cmd:COMMAND)`},
		{"secret as", base + "    secrets:\n      TOKEN: {from: env:X, as: stdin}\n", `t.yaml:6:32: servers.s.secrets.TOKEN.as: invalid value "stdin" (want env or file)`},
		{"secret name", base + "    secrets:\n      ../x: {from: env:X}\n", `t.yaml:6:7: servers.s.secrets: invalid secret name "../x" (want ^[A-Za-z_][A-Za-z0-9_]*$)`},
		{"secret also in env", base + "    env: {TOKEN: x}\n    secrets: {TOKEN: {from: env:T}}\n", `t.yaml:6:15: servers.s.secrets: TOKEN is also set in env`},
		{"egress host", egressAt(`host: "exa mple.com"`), `t.yaml:7:18: servers.s.network.egress[0].host: invalid host "exa mple.com" (want a host name, *.DOMAIN, * or an IP address)`},
		{"egress host with port", egressAt(`host: "api.github.com:443"`), `t.yaml:7:18: servers.s.network.egress[0].host: invalid host "api.github.com:443" (put ports in ports: [...])`},
		{"egress inner wildcard", egressAt(`host: "a.*.com"`), `t.yaml:7:18: servers.s.network.egress[0].host: invalid host "a.*.com" (want a host name, *.DOMAIN, * or an IP address)`},
		{"egress bad wildcard", egressAt(`host: "*."`), `t.yaml:7:18: servers.s.network.egress[0].host: invalid wildcard "*." (want *.DOMAIN)`},
		{"egress bracketed v6", egressAt(`host: "[::1]"`), `t.yaml:7:18: servers.s.network.egress[0].host: write IPv6 addresses without brackets`},
		{"egress numeric name", egressAt(`host: 1.2.3`), `t.yaml:7:18: servers.s.network.egress[0].host: invalid host "1.2.3" (want a host name, *.DOMAIN, * or an IP address)`},
		{"egress port zero", egressAt(`host: a.example, ports: [443, 0]`), `t.yaml:7:42: servers.s.network.egress[0].ports[1]: 0 is not a port (want 1-65535)`},
		{"egress port too big", egressAt(`host: a.example, ports: [65536]`), `t.yaml:7:37: servers.s.network.egress[0].ports[0]: 65536 is not a port (want 1-65535)`},
		{"egress port string", egressAt(`host: a.example, ports: [https]`), `t.yaml:7:37: servers.s.network.egress[0].ports[0]: expected an integer, got a string`},
		{"egress nothing", egressAt(`ports: [443]`), `t.yaml:7:11: servers.s.network.egress[0]: needs a host or a cidr`},
		{"egress cidr host bits", egressAt(`cidr: 10.1.2.3/8`), `t.yaml:7:18: servers.s.network.egress[0].cidr: "10.1.2.3/8" has host bits set (want 10.0.0.0/8)`},
		{"egress cidr invalid", egressAt(`cidr: 10.0.0.0/33`), `t.yaml:7:18: servers.s.network.egress[0].cidr: invalid CIDR "10.0.0.0/33"`},
		{"network limit zero", base + "    network:\n      limits: {connections: 0}\n", `t.yaml:6:29: servers.s.network.limits.connections: must be positive (leave it out for the default)`},
		{"forward not loopback", forwardAt(`listen: "0.0.0.0:5432", to: "db:5432"`), `t.yaml:7:20: servers.s.network.forward[0].listen: 0.0.0.0 is not a loopback address`},
		{"forward proxy port, mapped", forwardAt(`listen: "[::ffff:127.0.0.1]:3128", to: "db:5432"`), `t.yaml:7:20: servers.s.network.forward[0].listen: 127.0.0.1:3128 is taken by the egress proxy forwarder`},
		{"forward twice, once mapped", base + "    network:\n      forward:\n        - {listen: \"127.0.0.1:5432\", to: \"db:5432\"}\n        - {listen: \"[::ffff:127.0.0.1]:5432\", to: \"db:5432\"}\n", `t.yaml:8:20: servers.s.network.forward[1].listen: 127.0.0.1:5432 is already forwarded`},
		{"forward in the DNS's range", forwardAt(`listen: "127.200.0.1:5432", to: "db:5432"`), `t.yaml:7:20: servers.s.network.forward[0].listen: 127.200.0.1 is in 127.128.0.0/9, which the sandbox's DNS gives names (use 127.0.0.1 or another address below 127.128.0.0)`},
		{"forward proxy port", forwardAt(`listen: "127.0.0.1:3128", to: "db:5432"`), `t.yaml:7:20: servers.s.network.forward[0].listen: 127.0.0.1:3128 is taken by the egress proxy forwarder`},
		{"forward host name listen", forwardAt(`listen: "localhost:80", to: "db:5432"`), `t.yaml:7:20: servers.s.network.forward[0].listen: invalid address "localhost:80" (want IP:PORT on loopback, e.g. 127.0.0.1:5432)`},
		{"forward bad target", forwardAt(`listen: "127.0.0.1:80", to: "db"`), `t.yaml:7:40: servers.s.network.forward[0].to: "db" is not HOST:PORT`},
		{"exec relative", base + "    exec: {allow: [node]}\n", `t.yaml:5:20: servers.s.exec.allow[0]: "node" is not an absolute path`},
		{"pids zero", base + "    limits: {pids: 0}\n", `t.yaml:5:20: servers.s.limits.pids: must be positive (leave it out for the default)`},
		{"pids negative", base + "    limits: {pids: -3}\n", `t.yaml:5:20: servers.s.limits.pids: must be positive (leave it out for the default)`},
		{"cpu too big", base + "    limits: {cpu: 2000}\n", `t.yaml:5:19: servers.s.limits.cpu: 2000 is out of range (want more than 0, at most 1024)`},
		{"cpu zero", base + "    limits: {cpu: 0.0}\n", `t.yaml:5:19: servers.s.limits.cpu: 0 is out of range (want more than 0, at most 1024)`},
		{"memory tiny", base + "    limits: {memory: 100k}\n", `t.yaml:5:22: servers.s.limits.memory: 100k is too small (want at least 1Mi)`},
		{"call timeout zero", base + "    limits: {call_timeout: 0s}\n", `t.yaml:5:28: servers.s.limits.call_timeout: must be positive (leave it out for the default)`},
		{"idle action", base + "    lifecycle: {idle_action: sleep}\n", `t.yaml:5:30: servers.s.lifecycle.idle_action: invalid value "sleep" (want pause or stop)`},
		{"restart", base + "    lifecycle: {restart: sometimes}\n", `t.yaml:5:26: servers.s.lifecycle.restart: invalid value "sometimes" (want no, on-failure or always)`},
		{"idle stop too short", base + "    lifecycle: {idle: 1h, idle_stop: 30m}\n", `t.yaml:5:38: servers.s.lifecycle.idle_stop: 30m must be longer than idle (1h)`},
		{"idle stop with stop", base + "    lifecycle: {idle: 1h, idle_action: stop, idle_stop: 2h}\n", `t.yaml:5:57: servers.s.lifecycle.idle_stop: only applies with idle_action: pause`},
		{"pin", base + "    pin: always\n", `t.yaml:5:10: servers.s.pin: invalid value "always" (want enforce, tofu, warn or off)`},
		{"bad glob", base + "    tools: {deny: [\"[a-\"]}\n", `t.yaml:5:20: servers.s.tools.deny[0]: invalid tool pattern "[a-"`},
		{"empty glob", base + "    tools: {allow: [\"\"]}\n", `t.yaml:5:21: servers.s.tools.allow[0]: empty tool pattern`},
		{"rule action", base + "    tools: {rules: [{tool: x, action: maybe}]}\n", `t.yaml:5:39: servers.s.tools.rules[0].action: invalid value "maybe" (want allow, deny or approve)`},
		{"rule without action", base + "    tools: {rules: [{tool: x}]}\n", `t.yaml:5:21: servers.s.tools.rules[0]: missing action (want allow, deny or approve)`},
		{"rule without tool", base + "    tools: {rules: [{action: deny}]}\n", `t.yaml:5:21: servers.s.tools.rules[0].tool: empty tool pattern`},
		{"rate limit zero", base + "    tools: {rate_limit: {per_minute: 0}}\n", `t.yaml:5:38: servers.s.tools.rate_limit.per_minute: must be positive (leave it out for the default)`},
		{"unknown layer", base + "    sandbox: {require: [userns, apparmor]}\n", `t.yaml:5:33: servers.s.sandbox.require[1]: unknown layer "apparmor" (want userns, mountns, pidns, netns, seccomp, landlock, cgroups, idmap)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load("t.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Load succeeded, want error %q", tt.want)
			}
			if c != nil {
				t.Errorf("Load returned a config along with the error")
			}
			es := AsErrors(err)
			if len(es) == 0 {
				t.Fatalf("Load error %v is not an Errors", err)
			}
			if got := es[0].Error(); got != tt.want {
				t.Errorf("first error:\n got %s\nwant %s\nall:\n%v", got, tt.want, err)
			}
		})
	}
}

// TestLoadReportsAllAtOnce: a value of the wrong shape does not hide
// the checks' errors elsewhere, so that one run names every mistake; what
// the checks would say of the value that did not decode, or of the block
// holding it (left empty), is not said.
func TestLoadReportsAllAtOnce(t *testing.T) {
	_, err := Load("t.yaml", []byte(`version: 1
servers:
  w:
    builtin: workspace
    tools: {allow: ["*"], default: allw}
    limits: {memory: 512MB}
    lifecycle: {restart: sometimes}
  fs:
    command: node x.js
  u:
    command: [srv]
    limits: {memroy: 1Gi}
    lifecycle: {restart: never}
`))
	want := []string{
		`t.yaml:5:36: servers.w.tools.default: invalid value "allw" (want allow, deny or approve)`,
		`t.yaml:6:22: servers.w.limits.memory: invalid size "512MB"`,
		`t.yaml:7:26: servers.w.lifecycle.restart: invalid value "sometimes" (want no, on-failure or always)`,
		`t.yaml:9:14: servers.fs.command: expected a list, got a string`,
		`t.yaml:12:14: unknown key "memroy" in servers.u.limits; did you mean "memory"?`,
		`t.yaml:13:26: servers.u.lifecycle.restart: invalid value "never"`,
	}
	es := AsErrors(err)
	if len(es) != len(want) {
		t.Fatalf("Load: %d errors, want %d:\n%v", len(es), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(es[i].Error(), w) {
			t.Errorf("error %d:\n got %s\nwant %s...", i, es[i], w)
		}
	}
}

// TestLoadLeavesOutWhatFollows: a check across blocks does not report
// what follows from a block that did not decode (it looks empty).
func TestLoadLeavesOutWhatFollows(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"clients of the wrong shape": {base + "listen: {http: {addr: 0.0.0.0:8765}}\nclients: {a: {token: {from: env:T}}}\n", "clients: expected a list"},
		"a group member's scope":     {"version: 1\nservers:\n  s: {command: [x], placement: group:g, scope: [session]}\n  t: {command: [y], placement: group:g}\n", "servers.s.scope: expected a string"},
		"a prefix":                   {"version: 1\nservers:\n  a: {command: [x]}\n  ab: {command: [y], prefix: [x]}\n", "servers.ab.prefix: expected a string"},
		"a misspelt servers":         {"version: 1\nsevrers:\n  a: {command: [x]}\n", `unknown top-level key "sevrers"`},
	} {
		_, err := Load("t.yaml", []byte(tc.yaml))
		es := AsErrors(err)
		if len(es) != 1 || !strings.Contains(es[0].Msg, tc.want) {
			t.Errorf("%s: Load: %v; want only %q", name, err, tc.want)
		}
	}
}

// TestSecretsNotEchoed checks that errors about what may be a pasted secret
// do not repeat it.
func TestSecretsNotEchoed(t *testing.T) {
	const secret = "ghp_s3cr3tV4lue"
	tests := []struct{ name, yaml string }{
		{"secret scalar", base + "    secrets: {TOKEN: " + secret + "}\n"},
		{"secret from literal", base + "    secrets: {TOKEN: {from: " + secret + "}}\n"},
		{"token scalar", base + "clients: [{name: a, token: " + secret + "}]\n"},
		{"token from literal", base + "clients: [{name: a, token: {from: " + secret + "}}]\n"},
		{"command line as a string", "version: 1\nservers:\n  s:\n    command: srv --token=" + secret + "\n"},
		{"args as a string", base + "    args: --token " + secret + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error repeats the secret: %v", err)
			}
		})
	}
}

func TestPrefixesAndHeaders(t *testing.T) {
	tests := []struct {
		name, yaml, wantErr string
	}{
		{"default prefixes", "servers:\n  a: {command: [x]}\n  b: {command: [y]}\n", ""},
		{"explicit empty with one server", "servers:\n  a: {command: [x], prefix: \"\"}\n", ""},
		{"empty prefix beside another", "servers:\n  a: {command: [x], prefix: \"\"}\n  b: {command: [y]}\n", "overlaps"},
		{"prefix begins another", "servers:\n  a: {command: [x], prefix: gh}\n  b: {command: [y], prefix: gh_x}\n", "overlaps"},
		{"default overlaps explicit", "servers:\n  a: {command: [x]}\n  b: {command: [y], prefix: a__b}\n", "overlaps"},
		{"bad characters", "servers:\n  a: {command: [x], prefix: \"a b\"}\n", "invalid prefix"},
		{"headers on remote", "servers:\n  r: {url: \"https://example.com/mcp\", headers: {Authorization: {from: env:TOK}}}\n", ""},
		{"headers on local", "servers:\n  a: {command: [x], headers: {Authorization: {from: env:TOK}}}\n", "only a remote server"},
		{"header value inline", "servers:\n  r: {url: \"https://example.com/mcp\", headers: {Authorization: Bearer abc}}\n", "never go in the config"},
		{"builtin", "servers:\n  w: {builtin: workspace, commands: {allow: [ls, \"git *\"], deny: [rm]}}\n", ""},
		{"unknown builtin", "servers:\n  w: {builtin: shell}\n", "unknown built-in server"},
		{"builtin and command", "servers:\n  w: {builtin: workspace, command: [x]}\n", "exclusive"},
		{"commands without builtin", "servers:\n  a: {command: [x], commands: {allow: [ls]}}\n", "only the built-in"},
		{"bad command glob", "servers:\n  w: {builtin: workspace, commands: {deny: [\"[\"]}}\n", "bad glob"},
		{"mount over /run/mcpbox", "servers:\n  a: {command: [x], filesystem: {mounts: [{source: /srv, target: /run/mcpbox/x}]}}\n", "overlaps"},
		{"group", "servers:\n  a: {command: [x], placement: \"group:dev\", filesystem: {output: {}}}\n  b: {command: [y], placement: \"group:dev\", env: {K: v}}\n", ""},
		{"group member with its own filesystem", "servers:\n  a: {command: [x], placement: \"group:dev\"}\n  b: {command: [y], placement: \"group:dev\", filesystem: {output: {}}}\n", "set by its first server a"},
		{"group member with its own memory", "servers:\n  a: {command: [x], placement: \"group:dev\"}\n  b: {command: [y], placement: \"group:dev\", limits: {memory: 1Gi}}\n", "set limits.memory there"},
		{"builtin in a group", "servers:\n  w: {builtin: workspace, placement: \"group:dev\"}\n", "not in a group"},
		{"ttl in a group", "servers:\n  a: {command: [x], placement: \"group:dev\", secrets: {T: {from: env:T, ttl: 1h}}}\n", "cannot renew it"},
		{"group with two scopes", "servers:\n  a: {command: [x], placement: \"group:dev\"}\n  b: {command: [y], placement: \"group:dev\", scope: session}\n", "share their sandboxes"},
		{"credentials policy", "servers:\n  a: {command: [x], credentials: block}\n", ""},
		{"bad credentials policy", "servers:\n  a: {command: [x], credentials: ignore}\n", "invalid value"},
		{"bad header name", "servers:\n  r: {url: \"https://example.com/mcp\", headers: {\"a b\": {from: env:TOK}}}\n", "invalid HTTP header name"},
		{"query on remote", "servers:\n  r: {url: \"https://example.com/mcp?profile=p\", query: {api_key: {from: env:TOK}}}\n", ""},
		{"query on local", "servers:\n  a: {command: [x], query: {api_key: {from: env:TOK}}}\n", "only a remote server (url) takes query parameters"},
		{"query value inline", "servers:\n  r: {url: \"https://example.com/mcp\", query: {api_key: sk-abc}}\n", "never go in the config"},
		{"query without from", "servers:\n  r: {url: \"https://example.com/mcp\", query: {api_key: {}}}\n", "query.api_key.from: missing reference"},
		{"bad query name", "servers:\n  r: {url: \"https://example.com/mcp\", query: {\"a&b\": {from: env:TOK}}}\n", "invalid query parameter name"},
		{"query also in url", "servers:\n  r: {url: \"https://example.com/mcp?api_key=x\", query: {api_key: {from: env:TOK}}}\n", "the url has this parameter too"},
		{"sse transport", "servers:\n  r: {url: \"https://example.com/sse\", transport: sse}\n", ""},
		{"auto transport", "servers:\n  r: {url: \"https://example.com/mcp\", transport: auto}\n", ""},
		{"streamable transport", "servers:\n  r: {url: \"https://example.com/mcp\", transport: streamable}\n", ""},
		{"unknown transport", "servers:\n  r: {url: \"https://example.com/mcp\", transport: websocket}\n", "invalid value"},
		{"transport on local", "servers:\n  a: {command: [x], transport: sse}\n", "only a remote server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte("version: 1\n"+tt.yaml))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// A server's warm_pool replaces the top level's, 0 included.
func TestWarmPoolPrecedence(t *testing.T) {
	c, err := Load("t.yaml", []byte(`version: 1
sandbox: {warm_pool: 3}
servers:
  a: {command: [a]}
  b: {command: [b], sandbox: {warm_pool: 0}}
  c: {command: [c], sandbox: {warm_pool: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, s := range c.Servers {
		got[s.Name] = c.WarmPool(s)
	}
	if want := map[string]int{"a": 3, "b": 0, "c": 1}; !maps.Equal(got, want) {
		t.Fatalf("warm pools %v, want %v", got, want)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\nnext line": "plain\ttext\nnext line",
		"\x1b[2Jok\r":            `\x1b[2Jok\r`,
		"a\x9b2Jb":               `a\x9b2Jb`,
		"a\u009bb\u202ec\u2028d": `a\u009bb\u202ec\u2028d`,
		"ünïcode ✓":              "ünïcode ✓",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
