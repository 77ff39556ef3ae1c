package launch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
)

// TestApplyProxySecrets: the sandbox's spec gets placeholders of the
// values (never a value), the Set and CA on its network, and the TLS
// variables; the book learns the real values, not the placeholders.
func TestApplyProxySecrets(t *testing.T) {
	real := "ghp_" + strings.Repeat("a1B2", 9)
	t.Setenv("MCPBOX_TEST_T", real)
	t.Setenv("MCPBOX_TEST_AK", "AKIAIOSFODNN7EXAMPLE")
	t.Setenv("MCPBOX_TEST_SK", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, []byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", bundle)
	secs := []config.Secret{
		{Name: "PLAIN", From: "env:MCPBOX_TEST_AK"},
		{Name: "T", From: "env:MCPBOX_TEST_T", As: config.SecretAsFile,
			Inject: &config.Inject{Hosts: []string{"api.github.com"}, Header: "Authorization", Format: "Bearer {value}"}},
		{Name: "AWS", Inject: &config.Inject{Hosts: []string{"*.amazonaws.com"},
			AWS: &config.InjectAWS{AccessKeyID: "env:MCPBOX_TEST_AK", SecretAccessKey: "env:MCPBOX_TEST_SK"}}},
	}
	plain, proxied, err := ResolveAll(context.Background(), secs)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != 1 || len(proxied) != 2 {
		t.Fatalf("plain %d, proxied %d: want 1 and 2", len(plain), len(proxied))
	}
	var book redact.Book
	for _, p := range proxied {
		if err := p.Learn(&book); err != nil {
			t.Fatal(err)
		}
	}
	if got := book.String("x " + real + " y"); strings.Contains(got, real) {
		t.Fatalf("the book does not redact the real value: %q", got)
	}
	spec := sandbox.Spec{Network: sandbox.Network{Rules: []egress.Rule{{Host: "api.github.com"}}}}
	if err := ApplyProxySecrets(&spec, proxied, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(spec.ID, "sbx_") || spec.Network.Injector == nil || spec.Network.CA == nil {
		t.Fatalf("spec: id %q, injector %v, ca %v", spec.ID, spec.Network.Injector, spec.Network.CA)
	}
	got := map[string]sandbox.Secret{}
	for _, s := range spec.Secrets {
		got[s.Name] = s
	}
	if ph := got["T"]; string(ph.Value) == real || len(ph.Value) != len(real) || !strings.HasPrefix(string(ph.Value), "ghp_") || !ph.AsFile {
		t.Fatalf("T in the sandbox = %q (file %v): want a file placeholder of the value's shape", ph.Value, ph.AsFile)
	}
	if k, s := got["AWS_ACCESS_KEY_ID"], got["AWS_SECRET_ACCESS_KEY"]; len(k.Value) != 20 || string(k.Value) == "AKIAIOSFODNN7EXAMPLE" ||
		len(s.Value) == 0 || strings.Contains(string(s.Value), "EXAMPLEKEY") {
		t.Fatalf("AWS pair in the sandbox = %q, %q: want a fake pair", k.Value, s.Value)
	}
	for _, sec := range spec.Secrets {
		if !isPlaceholder(spec, sec) {
			t.Fatalf("%s: not known as a placeholder", sec.Name)
		}
	}
	if isPlaceholder(spec, sandbox.Secret{Name: "T", Value: []byte(real)}) {
		t.Fatal("the real value is taken for a placeholder")
	}
	for _, want := range []string{"SSL_CERT_FILE=" + sandbox.TrustBundlePath, "NODE_EXTRA_CA_CERTS=" + sandbox.TrustCAPath} {
		if !slices.Contains(spec.Env, want) {
			t.Fatalf("env %v lacks %s", spec.Env, want)
		}
	}
	if b := string(spec.Network.TrustBundle); !strings.HasPrefix(b, "-----BEGIN CERTIFICATE-----\nAA==") || !strings.HasSuffix(b, string(spec.Network.CA.CertPEM())) {
		t.Fatalf("trust bundle: want SSL_CERT_FILE's then the CA's certificate:\n%s", b)
	}
	// Without the egress proxy there is nothing to add the value.
	if err := ApplyProxySecrets(&sandbox.Spec{}, proxied, "", nil, nil); err == nil {
		t.Fatal("ApplyProxySecrets without egress rules: want an error")
	}
}
