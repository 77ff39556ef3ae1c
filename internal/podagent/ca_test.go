package podagent

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func parsePEM(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLoadOrCreateCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, CAFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("CA file mode %o, want 600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %o, want 700", di.Mode().Perm())
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca.CAPEM(), again.CAPEM()) {
		t.Fatal("a restarted gateway has a different CA: its pods would refuse it")
	}
	// A pod issued by the first trusts the second's client certificate.
	certPEM, _, err := ca.IssuePod("pod-a")
	if err != nil {
		t.Fatal(err)
	}
	leaf := parsePEM(t, certPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: again.pool, DNSName: PodServerName("pod-a")}); err != nil {
		t.Errorf("the reloaded CA does not verify a pod of the first: %v", err)
	}
	client, err := again.clientCert()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Leaf.Verify(x509.VerifyOptions{Roots: ca.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the first CA does not verify the reloaded one's client: %v", err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".pod-ca-*")); len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a CA readable by others was loaded: %v", err)
	}
	os.Chmod(path, 0o600)
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Error("a CA file without a key or certificate was loaded")
	}
}

func TestLoadOrCreateCARace(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	pems := make([][]byte, 8)
	for i := range pems {
		wg.Go(func() {
			ca, err := LoadOrCreateCA(dir)
			if err != nil {
				t.Error(err)
				return
			}
			pems[i] = ca.CAPEM()
		})
	}
	wg.Wait()
	for i := range pems {
		if !bytes.Equal(pems[i], pems[0]) {
			t.Fatal("gateways racing to create the CA ended with different ones")
		}
	}
}

func TestIssuePod(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "Pod", "a.b", "-a", "a-", "a_b", "a/b", strings.Repeat("a", 64), "*", "pod a"} {
		if _, _, err := ca.IssuePod(bad); err == nil {
			t.Errorf("IssuePod(%q) succeeded", bad)
		}
	}
	certPEM, keyPEM, err := ca.IssuePod("pod-a")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(keyPEM, []byte("PRIVATE KEY")) {
		t.Error("no key")
	}
	leaf := parsePEM(t, certPEM)
	if got := leaf.DNSNames; len(got) != 1 || got[0] != "pod-a.pod.mcpbox.internal" {
		t.Errorf("DNS names %v", got)
	}
	if life := leaf.NotAfter.Sub(leaf.NotBefore); life > DefaultPodTTL+skew+time.Minute {
		t.Errorf("a pod certificate lives %s", life)
	}
	if leaf.IsCA || len(leaf.IPAddresses) != 0 || len(leaf.URIs) != 0 {
		t.Error("a pod certificate is a CA or names more than its pod")
	}
	opts := x509.VerifyOptions{Roots: ca.pool}
	opts.DNSName = PodServerName("pod-a")
	if _, err := leaf.Verify(opts); err != nil {
		t.Errorf("pod-a's certificate does not verify as pod-a: %v", err)
	}
	opts.DNSName = PodServerName("pod-b")
	if _, err := leaf.Verify(opts); err == nil {
		t.Error("pod-a's certificate verifies as pod-b")
	}
	// A pod's certificate serves; it is no client, least of all the gateway.
	opts = x509.VerifyOptions{Roots: ca.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := leaf.Verify(opts); err == nil {
		t.Error("a pod's certificate verifies for client authentication")
	}
	if isGateway(leaf) {
		t.Error("a pod's certificate passes as the gateway's")
	}
	client, err := ca.clientCert()
	if err != nil {
		t.Fatal(err)
	}
	if !isGateway(client.Leaf) {
		t.Error("the gateway's client certificate does not pass as the gateway's")
	}
	if _, err := client.Leaf.Verify(x509.VerifyOptions{Roots: ca.pool, DNSName: PodServerName("pod-a")}); err == nil {
		t.Error("the gateway's client certificate can serve as pod-a")
	}
	if _, _, err := ca.IssuePodTTL("pod-a", 0); err == nil {
		t.Error("a pod certificate with no lifetime was issued")
	}
}

func TestCANameConstraints(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	// Even a certificate the CA's key signs outside IssuePod's checks
	// verifies only for the pod domain.
	key := ca.key
	der, err := sign(&x509.Certificate{DNSNames: []string{"example.com"}, NotBefore: time.Now().Add(-time.Minute),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca.cert, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.pool, DNSName: "example.com"}); err == nil {
		t.Error("the pod CA vouches for example.com")
	} else if !strings.Contains(err.Error(), "constraint") {
		t.Errorf("refused for another reason than its name constraint: %v", err)
	}
}

func TestClientCertRenewed(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	first, err := ca.clientCert()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := ca.clientCert(); again != first {
		t.Error("a fresh client certificate was replaced")
	}
	// Near its end it is issued again.
	ca.mu.Lock()
	first.Leaf.NotAfter = time.Now().Add(clientTTL / 4)
	ca.mu.Unlock()
	renewed, err := ca.clientCert()
	if err != nil {
		t.Fatal(err)
	}
	if renewed == first || time.Until(renewed.Leaf.NotAfter) < clientTTL/2 {
		t.Error("a client certificate near its end was not renewed")
	}
}

// TestLoadOrCreateCARefusesAnotherOwner: a CA file that another user
// placed in the state directory (one others may write, or before the
// gateway first ran) is refused, not trusted: its owner knows the key
// and could pass for the gateway to every pod, and for every pod to it.
func TestLoadOrCreateCARefusesAnotherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	attacker := t.TempDir()
	if _, err := LoadOrCreateCA(attacker); err != nil {
		t.Fatal(err)
	}
	planted, err := os.ReadFile(filepath.Join(attacker, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, CAFile)
	if err := os.WriteFile(path, planted, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	ca, err := LoadOrCreateCA(dir)
	if err == nil {
		t.Fatalf("loaded a CA file owned by uid 65534 (its CA: %q...)", ca.CAPEM()[:40])
	}
	if !strings.Contains(err.Error(), "owned by") {
		t.Errorf("error %q does not say whose the file is", err)
	}
	// Nor one a link leads to, even the gateway's own: the link's
	// author chose it.
	own := filepath.Join(attacker, CAFile)
	os.Remove(path)
	if err := os.Symlink(own, path); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a CA file reached through a symlink: %v", err)
	}
}
