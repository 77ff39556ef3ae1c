package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/netip"
	"sync"
	"time"
)

// CA lifetimes. A leaf is re-minted when less than leafRenew of it is left,
// so a long-running gateway never presents an expired certificate.
const (
	caLifetime   = 397 * 24 * time.Hour
	leafLifetime = 7 * 24 * time.Hour
	leafRenew    = 24 * time.Hour
	clockSkew    = time.Hour // NotBefore back-dated for sandbox clocks
)

// CA is the in-memory certificate authority with which a proxy terminates
// TLS for intercepted hosts. Its key is generated in this process and never
// leaves it; only CertPEM is meant for the sandbox's trust bundle. A CA is
// safe for concurrent use and may be shared by the proxies of one gateway.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey // shared by all leaves: minting stays cheap
	pem     []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // guarded by mu; by host
}

// NewCA generates a CA named name (it appears as the issuer in the
// sandbox's view of intercepted connections).
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating leaf key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randSerial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"mcpbox egress"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // it signs leaves only
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &CA{
		cert: cert, key: key, leafKey: leafKey,
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		leaves: map[string]*tls.Certificate{},
	}, nil
}

// CertPEM returns the CA certificate in PEM, for the sandbox's trust
// bundle. It holds no key.
func (c *CA) CertPEM() []byte { return append([]byte(nil), c.pem...) }

// Certificate returns the parsed CA certificate (for pools in tests and
// wiring).
func (c *CA) Certificate() *x509.Certificate { return c.cert }

// leaf returns a certificate for host (a normalized name or an IP),
// minting and caching it.
func (c *CA) leaf(host string) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if l, ok := c.leaves[host]; ok && now.Add(leafRenew).Before(l.Leaf.NotAfter) {
		return l, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber: randSerial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.After(c.cert.NotAfter) {
		tmpl.NotAfter = c.cert.NotAfter
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &c.leafKey.PublicKey, c.key)
	if err != nil {
		return nil, fmt.Errorf("minting certificate for %s: %w", host, err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate for %s: %w", host, err)
	}
	l := &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: c.leafKey, Leaf: parsed}
	c.leaves[host] = l
	return l, nil
}

func randSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("crypto/rand failed: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return n
}

// KeyPEM returns the CA's private key in PEM (PKCS #8). It exists for
// one purpose: the gateway hands it, over mutual TLS and into memory
// only, to the Kubernetes egress proxy that intercepts for its pods
// (package egressproxy); never write it to disk or an API object.
func (c *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(c.key)
	if err != nil {
		return nil, fmt.Errorf("encoding CA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseCA returns the CA whose certificate and key CertPEM and KeyPEM
// returned, with a fresh leaf key of its own.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || cb.Type != "CERTIFICATE" || kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("parsing CA: want a PEM CERTIFICATE and a PEM PRIVATE KEY")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if pub, pok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pok || !pub.Equal(&key.PublicKey) || !cert.IsCA {
		return nil, fmt.Errorf("parsing CA: the certificate is not a CA or does not match the key")
	}
	if time.Now().After(cert.NotAfter) {
		return nil, fmt.Errorf("parsing CA: expired on %s", cert.NotAfter.Format(time.DateOnly))
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating leaf key: %w", err)
	}
	return &CA{cert: cert, key: key, leafKey: leafKey,
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), leaves: map[string]*tls.Certificate{}}, nil
}
