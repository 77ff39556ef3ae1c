package egress

import (
	"crypto/x509"
	"testing"
)

// A CA parsed from its PEM signs leaves the original's certificate
// verifies; a key of another CA is refused.
func TestParseCA(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseCA(ca.CertPEM(), key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := got.leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "api.example.com"}); err != nil {
		t.Fatalf("a leaf of the parsed CA: %v", err)
	}
	other, _ := NewCA("other")
	okey, _ := other.KeyPEM()
	if _, err := ParseCA(ca.CertPEM(), okey); err == nil {
		t.Fatal("a foreign key was accepted")
	}
}
