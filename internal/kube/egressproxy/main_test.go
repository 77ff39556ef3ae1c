package egressproxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/egress"
	"mcpbox/internal/kube"
	"mcpbox/internal/podagent"
)

// TestConfigPathIsTheSecretsMount: the default --config is where the
// proxy's Deployment mounts its Secret.
func TestConfigPathIsTheSecretsMount(t *testing.T) {
	if cmd := kube.ProxyCommand("/m"); cmd[3] != DefaultConfigFile || cmd[1] != "egress-proxy" {
		t.Errorf("kube.ProxyCommand = %v, DefaultConfigFile = %s", cmd, DefaultConfigFile)
	}
}

func writeConfig(t *testing.T, file string, c Config) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	// As a Secret's mount changes: a new file renamed over the old.
	tmp := file + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

func TestRunServesAndReloads(t *testing.T) {
	srvA, portA := serve(t, false, "a")
	srvB, portB := serve(t, false, "b")
	key, _ := NewKey()
	file := filepath.Join(t.TempDir(), "config.json")
	writeConfig(t, file, Config{Key: key, Servers: map[string]ServerPolicy{"a": {Rules: []egress.Rule{loopback(portA)}}}})
	stdout, stderr := &lines{}, &lines{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, "127.0.0.1:0", file, 20*time.Millisecond, registryOptions{}, stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(waitFor):
			t.Error("run did not return after its context ended")
		}
	})
	addr := waitText(t, stderr, regexp.MustCompile(`on (127\.0\.0\.1:\d+)`))
	exp := time.Now().Add(time.Hour)
	r := &rig{}
	ca := r.client(t, ProxyURL(addr, "pa", Sign(key, "pa", "a", exp)), nil)
	cb := r.client(t, ProxyURL(addr, "pb", Sign(key, "pb", "b", exp)), nil)
	if code, body, err := get(t, ca, srvA.URL); err != nil || code != 200 || body != "a" {
		t.Fatalf("a: %d %q %v", code, body, err)
	}
	if code, _, _ := get(t, cb, srvB.URL); code != 407 {
		t.Fatalf("b before it is configured: %d", code)
	}
	// A bad config is refused and the old one stays.
	if err := os.WriteFile(file, []byte(`{"key":"AA=="}`), 0o600); err != nil {
		t.Fatal(err)
	}
	waitText(t, stderr, regexp.MustCompile(`(keeping the old config)`))
	if code, _, _ := get(t, ca, srvA.URL); code != 200 {
		t.Fatalf("a under the bad config: %d", code)
	}
	writeConfig(t, file, Config{Key: key, Servers: map[string]ServerPolicy{
		"a": {Rules: []egress.Rule{loopback(portA)}}, "b": {Rules: []egress.Rule{loopback(portB)}}}})
	waitText(t, stderr, regexp.MustCompile(`(config reloaded \(2 servers\))`))
	if code, body, err := get(t, cb, srvB.URL); err != nil || code != 200 || body != "b" {
		t.Fatalf("b after the reload: %d %q %v", code, body, err)
	}
	stdout.wait(t, "b's line on stdout", func(l Line) bool { return l.Pod == "pb" && l.Decision == "allow" && l.Server == "b" })
}

func waitText(t *testing.T, l *lines, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		m := re.FindStringSubmatch(l.buf.String())
		l.mu.Unlock()
		if m != nil {
			return m[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s in %q", re, l.buf.String())
	return ""
}

func TestMainUsage(t *testing.T) {
	var out, errb strings.Builder
	if code := Main([]string{"extra"}, &out, &errb); code != 2 {
		t.Errorf("extra argument: exit %d", code)
	}
	errb.Reset()
	if code := Main([]string{"--config", filepath.Join(t.TempDir(), "none.json"), "--listen", "127.0.0.1:0"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "reading the config") {
		t.Errorf("missing config: exit %d %q", code, errb.String())
	}
}

// TestRunReloadsRegistryCertificate: a replica whose registration
// certificate expired — the gateway no longer verifies it, so cannot
// send it the renewed one — serves the renewed certificate once its
// mounted TLS Secret shows it (as the kubelet refreshes the volume), and
// the gateway's handshake succeeds again. A mounted certificate that
// ends earlier than the one served, or does not chain to the pod CA, is
// not taken.
func TestRunReloadsRegistryCertificate(t *testing.T) {
	pca, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	other, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	const name = "mcpbox-egress-0a1b2c3d"
	dir := t.TempDir()
	mount := func(ca *podagent.CA, ttl time.Duration) []byte {
		t.Helper()
		cert, key, err := ca.IssuePodTTL(name, ttl)
		if err != nil {
			t.Fatal(err)
		}
		// As the kubelet swaps a volume: new files renamed over the old.
		for f, b := range map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": pca.CAPEM()} {
			if err := os.WriteFile(filepath.Join(dir, f+".new"), b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, f+".new"), filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
		}
		return cert
	}
	first := mount(pca, 2*time.Second)
	firstEnd := time.Now().Add(2 * time.Second)
	key, _ := NewKey()
	file := filepath.Join(t.TempDir(), "config.json")
	writeConfig(t, file, Config{Key: key, Servers: map[string]ServerPolicy{"a": {Inject: []string{"api.example.com"}}}})
	stdout, stderr := &lines{}, &lines{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, "127.0.0.1:0", file, 20*time.Millisecond, registryOptions{listen: "127.0.0.1:0", tlsDir: dir}, stdout, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(waitFor):
			t.Error("run did not return after its context ended")
		}
	})
	addr := waitText(t, stderr, regexp.MustCompile(`registration endpoint \(mutual TLS\) on (127\.0\.0\.1:\d+)`))
	// served is the certificate the gateway's handshake gets, or its error.
	served := func() ([]byte, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: waitFor}, "tcp", addr, pca.ClientTLS(name))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.ConnectionState().PeerCertificates[0].Raw}), nil
	}
	if got, err := served(); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("the mounted certificate: %v", err)
	}
	time.Sleep(time.Until(firstEnd.Add(500 * time.Millisecond)))
	if _, err := served(); err == nil {
		t.Fatal("the gateway's handshake took an expired certificate")
	}
	// Another CA's: refused, said once.
	mount(other, time.Hour)
	waitText(t, stderr, regexp.MustCompile(`(keeping the registration certificate)`))
	renewed := mount(pca, time.Hour)
	waitText(t, stderr, regexp.MustCompile(`(registration certificate reloaded)`))
	if got, err := served(); err != nil || !bytes.Equal(got, renewed) {
		t.Fatalf("after the mount's renewal: %v", err)
	}
	// An older one (it ends sooner) is not taken.
	mount(pca, 30*time.Minute)
	time.Sleep(200 * time.Millisecond) // ten reload ticks
	if got, err := served(); err != nil || !bytes.Equal(got, renewed) {
		t.Fatalf("a mounted certificate ending sooner replaced the served one: %v", err)
	}
	stderr.mu.Lock()
	defer stderr.mu.Unlock()
	if n := strings.Count(stderr.buf.String(), "reloaded from"); n != 1 {
		t.Errorf("%d reloads, want 1:\n%s", n, stderr.buf.String())
	}
}
