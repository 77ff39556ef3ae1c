package credinject

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/egress"
)

func TestTrustBundle(t *testing.T) {
	ca, err := egress.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := egress.NewCA("system stand-in")
	sys := strings.TrimSuffix(string(other.CertPEM()), "\n") // no final newline
	file := filepath.Join(t.TempDir(), "system.pem")
	if err := os.WriteFile(file, []byte(sys), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", file)
	host, err := HostBundle()
	if err != nil || string(host) != sys {
		t.Fatalf("HostBundle = %q, %v", host, err)
	}
	bundle := TrustBundle(host, ca)
	if strings.Contains(string(bundle), "PRIVATE KEY") {
		t.Fatal("bundle carries a key")
	}
	var names []string
	for rest := bundle; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, c.Subject.CommonName)
	}
	if strings.Join(names, ",") != "system stand-in,test" {
		t.Errorf("bundle holds %v", names)
	}
	env := strings.Join(TrustEnv("/b.pem", "/ca.pem"), " ")
	for _, want := range []string{"SSL_CERT_FILE=/b.pem", "REQUESTS_CA_BUNDLE=/b.pem", "CURL_CA_BUNDLE=/b.pem", "NODE_EXTRA_CA_CERTS=/ca.pem"} {
		if !strings.Contains(env, want) {
			t.Errorf("TrustEnv lacks %s", want)
		}
	}
}
