package config

import (
	"strings"
	"testing"
)

// injectAt puts a secret with inject fields on line 8 (its inject mapping
// at column 32) beside an egress rule for api.github.com:443 and a loopback
// rule for 127.0.0.1:8443.
func injectAt(secret string) string {
	return base + "    network:\n      egress: [{host: api.github.com, ports: [443]}, {host: 127.0.0.1, ports: [8443]}]\n" +
		"    secrets:\n      T: {" + secret + "}\n"
}

func TestInjectValid(t *testing.T) {
	c, err := Load("t.yaml", []byte(injectAt(`from: env:T, inject: {hosts: [api.github.com, "127.0.0.1:8443"], header: Authorization, format: "Bearer {value}", shape: jwt, body: true}`)))
	if err != nil {
		t.Fatal(err)
	}
	in := c.Servers[0].Secrets[0].Inject
	if in == nil || len(in.Hosts) != 2 || in.Header != "Authorization" || in.Format != "Bearer {value}" || in.Shape != "jwt" || !in.Body || in.Basic {
		t.Fatalf("inject = %+v", in)
	}
	// Printed and parsed again, it is the same.
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Load("t.yaml", out)
	if err != nil {
		t.Fatalf("reparse: %v\n%s", err, out)
	}
	in2 := c2.Servers[0].Secrets[0].Inject
	if in2 == nil || strings.Join(in2.Hosts, ",") != strings.Join(in.Hosts, ",") || in2.Format != in.Format || !in2.Body || in2.Shape != "jwt" {
		t.Fatalf("round trip: %+v\n%s", in2, out)
	}
	aws := base + "    network:\n      egress: [{host: \"*.amazonaws.com\"}]\n    secrets:\n      AWS:\n        inject:\n          hosts: [\"*.amazonaws.com\", s3.eu-west-1.amazonaws.com]\n" +
		"          aws: {access_key_id: env:AK, secret_access_key: env:SK, pass_through: true}\n"
	c, err = Load("t.yaml", []byte(aws))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Servers[0].Secrets[0].Inject.AWS; a == nil || a.AccessKeyID != "env:AK" || a.SecretAccessKey != "env:SK" || !a.PassThrough || !c.Servers[0].Secrets[0].IsAWS() {
		t.Fatalf("aws = %+v", a)
	}
}

func TestInjectInvalid(t *testing.T) {
	tests := []struct{ name, secret, want string }{
		{"no hosts", `from: env:T, inject: {header: X}`,
			`t.yaml:8:32: servers.s.secrets.T.inject.hosts: required`},
		{"host not allowed", `from: env:T, inject: {hosts: [api.example.com], header: X}`,
			`t.yaml:8:41: servers.s.secrets.T.inject.hosts[0]: api.example.com port 443 is not allowed by servers.s.network.egress`},
		{"port not allowed", `from: env:T, inject: {hosts: ["api.github.com:8443"], header: X}`,
			`port 8443 is not allowed`},
		{"loopback default port", `from: env:T, inject: {hosts: [127.0.0.1], header: X}`,
			`127.0.0.1 port 443 is not allowed`},
		{"any host", `from: env:T, inject: {hosts: ["*"], header: X}`,
			`may not go to any host`},
		{"bad port", `from: env:T, inject: {hosts: ["api.github.com:0"], header: X}`,
			`port must be 1-65535`},
		{"nowhere", `from: env:T, inject: {hosts: [api.github.com]}`,
			`say where the value goes`},
		{"format without value", `from: env:T, inject: {hosts: [api.github.com], header: A, format: "Bearer x"}`,
			`format: must contain {value}`},
		{"format without header", `from: env:T, inject: {hosts: [api.github.com], query: k, format: "{value}"}`,
			`format: needs header`},
		{"bad header", `from: env:T, inject: {hosts: [api.github.com], header: "a b"}`,
			`invalid header name`},
		{"bad shape", `from: env:T, inject: {hosts: [api.github.com], header: A, shape: png}`,
			`shape: invalid value "png" (want jwt)`},
		{"unknown key", `from: env:T, inject: {hosts: [api.github.com], headr: A}`,
			`did you mean "header"?`},
		{"no from", `inject: {hosts: [api.github.com], header: A}`,
			`from: missing reference`},
		{"aws with from", `from: env:T, inject: {hosts: [api.github.com], aws: {access_key_id: env:A, secret_access_key: env:B}}`,
			`an aws secret has no from`},
		{"aws missing secret", `inject: {hosts: [api.github.com], aws: {access_key_id: env:A}}`,
			`aws.secret_access_key: missing reference`},
		{"aws literal", `inject: {hosts: [api.github.com], aws: {access_key_id: AKIAXXXX, secret_access_key: env:B}}`,
			`aws.access_key_id: must be a reference`},
		{"aws with header", `inject: {hosts: [api.github.com], header: A, aws: {access_key_id: env:A, secret_access_key: env:B}}`,
			`inject.header: not with aws`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("t.yaml", []byte(injectAt(tt.secret)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant %q", err, tt.want)
			}
		})
	}
}

// TestInjectWarnings: a secret added at the proxy is not held by the
// sandbox, so broad egress beside it is no warning; two aws secrets are
// told apart by their key references; a held secret still warns.
func TestInjectWarnings(t *testing.T) {
	cfg := func(secrets string) *Config {
		t.Helper()
		c, err := Load("t.yaml", []byte("version: 1\nservers:\n  s:\n    command: [srv]\n    tools: {allow: [\"*\"]}\n"+
			"    network: {egress: [{host: \"*\"}]}\n    secrets:\n"+secrets))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	aws := func(name, ak string) string {
		return "      " + name + ": {inject: {hosts: [\"*.amazonaws.com\"], aws: {access_key_id: env:" + ak + ", secret_access_key: env:SK" + ak + "}}}\n"
	}
	if w := Warnings(cfg(aws("A", "AK1") + aws("B", "AK2") + "      T: {from: env:T, inject: {hosts: [api.github.com], header: A}}\n")); len(w) != 0 {
		t.Fatalf("injected secrets only: want no warning, got %v", w)
	}
	if w := Warnings(cfg(aws("A", "AK1") + aws("B", "AK1"))); len(w) != 1 || !strings.Contains(w[0].Error(), "env:AK1 is also given") {
		t.Fatalf("one aws key twice: want one warning, got %v", w)
	}
	if w := Warnings(cfg("      T: {from: env:T}\n")); len(w) != 1 || !strings.Contains(w[0].Error(), "allows any host") {
		t.Fatalf("a held secret beside egress to any host: want one warning, got %v", w)
	}
	// body and any_header put the value wherever the server puts the
	// placeholder: a host that stores requests can hand it back.
	for _, tt := range []struct{ inject, want string }{
		{"body: true", "goes into request bodies to api.github.com"},
		{"any_header: true", "goes into any request header to api.github.com"},
		{"body: true, any_header: true", "goes into request bodies and any request header"},
	} {
		w := Warnings(cfg("      T: {from: env:T, inject: {hosts: [api.github.com], " + tt.inject + "}}\n"))
		if len(w) != 1 || !strings.Contains(w[0].Error(), tt.want) || !strings.Contains(w[0].Error(), "read it back") {
			t.Errorf("inject {%s}: want one warning containing %q, got %v", tt.inject, tt.want, w)
		}
	}
}
