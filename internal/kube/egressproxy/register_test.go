package egressproxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/podagent"
)

const proxyCertName = "mcpbox-egress-test"

// registry serves r's registration endpoint over mutual TLS with a
// certificate of ca, as a proxy pod does; it returns its address.
func (r *rig) registry(t *testing.T, ca *podagent.CA) string {
	t.Helper()
	return r.registryTTL(t, ca, podagent.DefaultPodTTL)
}

// registryTTL is registry with a certificate valid for ttl.
func (r *rig) registryTTL(t *testing.T, ca *podagent.CA, ttl time.Duration) string {
	t.Helper()
	dir := t.TempDir()
	cert, key, err := ca.IssuePodTTL(proxyCertName, ttl)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca.CAPEM()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf, err := podagent.ServerTLS(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.p.ServeRegistry(l, conf, io.Discard) }()
	t.Cleanup(func() {
		l.Close()
		if err := <-done; err != nil {
			t.Errorf("ServeRegistry: %v", err)
		}
	})
	return l.Addr().String()
}

// putState sends s to the registry at addr with TLS conf.
func putState(addr string, conf *tls.Config, s State) (int, string, error) {
	b, _ := json.Marshal(s)
	tr := &http.Transport{TLSClientConfig: conf}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPut, "https://"+addr+StatePath, bytes.NewReader(b))
	resp, err := (&http.Client{Transport: tr, Timeout: waitFor}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

// TestRegisteredPodGetsItsSecret: a pod of a server that adds a secret
// at the proxy is refused the secret's host until the gateway registered
// it (fail closed: the placeholder never goes out in a tunnel); once
// registered, its placeholder becomes the real value toward that host
// only, over TLS the replica terminates with the registered CA, the real
// value is redacted from the answer, each substitution is a line; the
// placeholder toward another allowed host is refused and is a line; a
// state without the pod closes its proxy and refuses again.
func TestRegisteredPodGetsItsSecret(t *testing.T) {
	const real = "ghp_R3alT0kenValue0123456789abcdefABCDEF"
	var mu sync.Mutex
	var seen []string // Authorization values the servers saw
	record := func(r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
	}
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		if r.Header.Get("Authorization") != "Bearer "+real {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "ok, you are "+real)
	}))
	t.Cleanup(api.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		io.WriteString(w, "other")
	}))
	t.Cleanup(other.Close)
	apiPort := api.Listener.Addr().(*net.TCPAddr).Port
	otherPort := other.Listener.Addr().(*net.TCPAddr).Port
	host := fmt.Sprintf("127.0.0.1:%d", apiPort)
	r := startRig(t, map[string]ServerPolicy{"s": {Rules: []egress.Rule{loopback(apiPort), loopback(otherPort)},
		Inject: []string{host}}}, nil)

	// What the gateway does: the CA, the pod's Set and its placeholder.
	ica, err := egress.NewCA("test interception CA")
	if err != nil {
		t.Fatal(err)
	}
	cred := credinject.Credential{Name: "GH", Value: real, Hosts: []string{host}, Header: "Authorization", Format: "Bearer {value}"}
	gwSet, err := credinject.New(credinject.Options{SandboxID: "pod-1", Credentials: []credinject.Credential{cred}})
	if err != nil {
		t.Fatal(err)
	}
	ph, _ := gwSet.Placeholder("GH")
	caKey, _ := ica.KeyPEM()
	apiCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})
	state := State{CACert: ica.CertPEM(), CAKey: caKey, UpstreamRoots: apiCert,
		Pods: []Registration{{Pod: "pod-1", Server: "s", Credentials: []credinject.Credential{cred}, Fakes: gwSet.Fakes()}}}

	// The pod trusts the interception CA (its bundle), as its start
	// request sets up.
	pool := x509.NewCertPool()
	pool.AddCert(ica.Certificate())
	c := r.client(t, ProxyURL(r.addr, "pod-1", r.token("pod-1", "s")), nil)
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	call := func(u string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Authorization", "Bearer "+ph)
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}

	// Not registered: refused, with the reason in the log.
	if code, _, err := call(api.URL); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("before registration: %d %v, want a refused CONNECT", code, err)
	}
	r.log.wait(t, "the unregistered refusal", func(l Line) bool {
		return l.Pod == "pod-1" && l.Decision == "deny" && strings.Contains(l.Reason, "no credential registration for pod pod-1")
	})

	ca, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	addr := r.registry(t, ca)
	if code, body, err := putState(addr, ca.ClientTLS(proxyCertName), state); err != nil || code != http.StatusNoContent {
		t.Fatalf("registering: %d %q %v", code, body, err)
	}
	code, body, err := call(api.URL + "/user")
	if err != nil || code != 200 || body != "ok, you are [REDACTED:GH]" {
		t.Fatalf("registered: %d %q %v", code, body, err)
	}
	ln := r.log.wait(t, "the injection", func(l Line) bool { return l.Kind == KindSecret && l.Decision == "inject" })
	if ln.Pod != "pod-1" || ln.Server != "s" || ln.Secret != "GH" || ln.Port != apiPort || ln.Where != "header Authorization" {
		t.Errorf("the injection's line = %+v", ln)
	}
	ev := ln.SecretEvent()
	if ev.Kind != "inject" || ev.Credential != "GH" || ev.SandboxID != "pod-1" {
		t.Errorf("SecretEvent() = %+v", ev)
	}
	// The placeholder toward another allowed host (plain HTTP, which
	// the proxy sees): refused and a line.
	if code, body, err := call(other.URL + "/x"); err != nil || code != http.StatusForbidden {
		t.Errorf("the placeholder elsewhere: %d %q %v, want 403", code, body, err)
	}
	r.log.wait(t, "the exfiltration", func(l Line) bool {
		return l.Kind == KindSecret && l.Decision == "exfiltration" && l.Port == otherPort && l.Secret == "GH"
	})

	// Deregistered: refused again.
	state.Pods = nil
	if code, body, err := putState(addr, ca.ClientTLS(proxyCertName), state); err != nil || code != http.StatusNoContent {
		t.Fatalf("deregistering: %d %q %v", code, body, err)
	}
	if code, _, err := call(api.URL); err == nil || code == 200 {
		t.Errorf("after deregistration: %d %v, want refused", code, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.Contains(s, ph) {
			t.Errorf("a server saw the placeholder: %q", s)
		}
	}
	if len(seen) != 1 || seen[0] != "Bearer "+real {
		t.Errorf("the servers saw %q, want the real value once", seen)
	}
}

// TestRegistryNeedsTheGatewaysCertificate: the registration endpoint
// takes a state from the gateway's client certificate only: no
// certificate, one of another CA, and a pod's certificate of the right
// CA are refused at the handshake, and nothing is registered.
func TestRegistryNeedsTheGatewaysCertificate(t *testing.T) {
	r := startRig(t, map[string]ServerPolicy{"s": {Rules: []egress.Rule{loopback(1)}}}, nil)
	ca, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	addr := r.registry(t, ca)
	ica, _ := egress.NewCA("test")
	key, _ := ica.KeyPEM()
	state := State{CACert: ica.CertPEM(), CAKey: key, Pods: []Registration{{Pod: "pod-1", Server: "s",
		Credentials: []credinject.Credential{{Name: "T", Value: "sk-0123456789abcdef0123456789", Hosts: []string{"api.example.com"}, Header: "X-Key"}}}}}

	other, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	podCert, podKey, err := ca.IssuePod("some-pod")
	if err != nil {
		t.Fatal(err)
	}
	podPair, err := tls.X509KeyPair(podCert, podKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*tls.Config){
		"no certificate": func(c *tls.Config) { c.GetClientCertificate = nil },
		"another CA's gateway": func(c *tls.Config) {
			c.GetClientCertificate = other.ClientTLS(proxyCertName).GetClientCertificate
		},
		"a pod's certificate": func(c *tls.Config) {
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &podPair, nil }
		},
	} {
		conf := ca.ClientTLS(proxyCertName)
		mod(conf)
		if code, body, err := putState(addr, conf, state); err == nil {
			t.Errorf("%s: registered: %d %q", name, code, body)
		}
	}
	if n := r.p.Registered(); n != 0 {
		t.Fatalf("%d pods registered by strangers", n)
	}
	if code, body, err := putState(addr, ca.ClientTLS(proxyCertName), state); err != nil || code != http.StatusNoContent {
		t.Fatalf("the gateway: %d %q %v", code, body, err)
	}
	if n := r.p.Registered(); n != 1 {
		t.Fatalf("%d pods registered, want 1", n)
	}
	// A state the proxy cannot use is refused whole.
	bad := state
	bad.CAKey = []byte("not a key")
	if code, _, err := putState(addr, ca.ClientTLS(proxyCertName), bad); err != nil || code != http.StatusBadRequest {
		t.Errorf("a bad CA key: %d %v, want 400", code, err)
	}
	if n := r.p.Registered(); n != 1 {
		t.Errorf("a refused state changed the registrations: %d", n)
	}
}

// TestRegistryCertificateRenewed: the registration endpoint serves the
// renewed certificate the gateway sends in its State, so that it still
// takes the gateway's registrations once the certificate it started with
// expired; a renewed certificate of another CA, of another name, or a
// client one, is refused with the State, and the current one kept.
func TestRegistryCertificateRenewed(t *testing.T) {
	r := startRig(t, map[string]ServerPolicy{"s": {Rules: []egress.Rule{loopback(1)}}}, nil)
	ca, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	// Room for the refused states and the renewal before it expires, on
	// a loaded machine too (CI under -race).
	const first = 10 * time.Second
	expires := time.Now().Add(first)
	addr := r.registryTTL(t, ca, first)
	ica, _ := egress.NewCA("test")
	key, _ := ica.KeyPEM()
	state := State{CACert: ica.CertPEM(), CAKey: key, Pods: []Registration{{Pod: "pod-1", Server: "s",
		Credentials: []credinject.Credential{{Name: "T", Value: "sk-0123456789abcdef0123456789", Hosts: []string{"api.example.com"}, Header: "X-Key"}}}}}
	put := func(s State) (int, string, error) { return putState(addr, ca.ClientTLS(proxyCertName), s) }

	other, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *podagent.CA, name string) (cert, key []byte) {
		cert, key, err := ca.IssuePodTTL(name, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return cert, key
	}
	for what, pair := range map[string][2][]byte{
		"another CA's": func() [2][]byte { c, k := issue(other, proxyCertName); return [2][]byte{c, k} }(),
		"another name": func() [2][]byte { c, k := issue(ca, "some-pod"); return [2][]byte{c, k} }(),
		"a key of another certificate": func() [2][]byte {
			c, _ := issue(ca, proxyCertName)
			_, k := issue(ca, proxyCertName)
			return [2][]byte{c, k}
		}(),
	} {
		bad := state
		bad.TLSCert, bad.TLSKey = pair[0], pair[1]
		if code, body, err := put(bad); err != nil || code != http.StatusBadRequest {
			t.Errorf("%s certificate: %d %s %v, want 400", what, code, body, err)
		}
	}
	if n := r.p.Registered(); n != 0 {
		t.Fatalf("%d pods registered by refused states", n)
	}
	renewed := state
	renewed.TLSCert, renewed.TLSKey = issue(ca, proxyCertName)
	if code, body, err := put(renewed); err != nil || code != http.StatusNoContent {
		t.Fatalf("renewing: %d %s %v", code, body, err)
	}
	time.Sleep(time.Until(expires.Add(1100 * time.Millisecond)))
	renewed.Pods = nil
	if code, body, err := put(renewed); err != nil || code != http.StatusNoContent {
		t.Fatalf("after the first certificate expired: %d %s %v", code, body, err)
	}
	if n := r.p.Registered(); n != 0 {
		t.Errorf("%d pods registered after the state without them", n)
	}
}

// TestRegistryWithoutRenewalExpires is the control of
// TestRegistryCertificateRenewed: without a renewed certificate the
// endpoint refuses the gateway once its certificate expired.
func TestRegistryWithoutRenewalExpires(t *testing.T) {
	r := startRig(t, map[string]ServerPolicy{"s": {Rules: []egress.Rule{loopback(1)}}}, nil)
	ca, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	const first = 2 * time.Second
	expires := time.Now().Add(first)
	addr := r.registryTTL(t, ca, first)
	if code, _, err := putState(addr, ca.ClientTLS(proxyCertName), State{}); err != nil || code != http.StatusNoContent {
		t.Fatalf("before expiry: %d %v", code, err)
	}
	time.Sleep(time.Until(expires.Add(1100 * time.Millisecond)))
	if _, _, err := putState(addr, ca.ClientTLS(proxyCertName), State{}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("after expiry: %v, want an expired certificate", err)
	}
}
