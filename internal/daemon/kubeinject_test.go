package daemon

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/kube"
	"mcpbox/internal/kube/egressproxy"
	"mcpbox/internal/podagent"
)

// fakePodAPI answers the API calls of kube.Register (the owner object
// and lease: echoed back) and lists pods (the current list).
type fakePodAPI struct {
	mu   sync.Mutex
	pods []corev1.Pod
	// secrets are the Secrets created and not deleted, by name; a
	// second create of one is 409 AlreadyExists.
	secrets map[string][]byte
	// secretCreates counts the Secrets created, by name.
	secretCreates map[string]int
}

func (f *fakePodAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.URL.Path, "/secrets") && f.secret(w, r) {
		return
	}
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods"):
		f.mu.Lock()
		list := corev1.PodList{Items: f.pods}
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(list)
	case r.Method == http.MethodPost:
		var obj map[string]any
		_ = json.NewDecoder(r.Body).Decode(&obj)
		if md, ok := obj["metadata"].(map[string]any); ok {
			md["uid"] = "uid-1"
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(obj)
	default:
		_, _ = io.WriteString(w, "{}")
	}
}

// secret answers a Secret's create and delete, and reports whether it did.
func (f *fakePodAPI) secret(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.secrets == nil {
		f.secrets, f.secretCreates = map[string][]byte{}, map[string]int{}
	}
	switch r.Method {
	case http.MethodPost:
		var sec corev1.Secret
		if err := json.NewDecoder(r.Body).Decode(&sec); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return true
		}
		if _, ok := f.secrets[sec.Name]; ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonAlreadyExists, Code: http.StatusConflict})
			return true
		}
		f.secrets[sec.Name] = sec.Data["tls.crt"]
		f.secretCreates[sec.Name]++
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(sec)
		return true
	case http.MethodDelete:
		delete(f.secrets, r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
		_, _ = io.WriteString(w, "{}")
		return true
	}
	return false
}

// registryPeer is one listener at a proxy pod's registration address: it
// records every byte it could read of what the gateway sent (after its
// TLS, if it has a certificate; raw otherwise).
type registryPeer struct {
	mu   sync.Mutex
	seen bytes.Buffer
	puts int
}

func (p *registryPeer) record(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen.Write(b)
}

// listenRegistry listens on a random loopback address at port (0: any),
// as a proxy pod's registration port at its own address.
func listenRegistry(t *testing.T, port int) net.Listener {
	t.Helper()
	for range 20 {
		var b [3]byte
		_, _ = rand.Read(b[:])
		ip := net.IPv4(127, b[0]|1, b[1], b[2]|1) // never 127.0.x.x nor .0
		l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(port)))
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			t.Skipf("listening on a loopback address: %v", err)
		}
		return l
	}
	t.Fatal("no free loopback address for the registration port")
	return nil
}

// servePeer serves l: with conf (a TLS server that accepts any client,
// answering every PUT 204), or raw (reads and records, answers nothing).
func servePeer(t *testing.T, l net.Listener, conf *tls.Config) *registryPeer {
	p := &registryPeer{}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if conf == nil {
					// What arrives before it answers (it never does):
					// the ClientHello, then the gateway gives up.
					b := make([]byte, 64<<10)
					n, _ := c.Read(b)
					p.record(b[:n])
					return
				}
				tc := tls.Server(c, conf)
				if tc.Handshake() != nil {
					return
				}
				req, err := http.ReadRequest(bufio.NewReader(tc))
				if err != nil {
					return
				}
				body, _ := io.ReadAll(req.Body)
				p.record(body)
				p.mu.Lock()
				p.puts++
				p.mu.Unlock()
				_, _ = io.WriteString(tc, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
			})
		}
	})
	return p
}

// serverConf is a TLS server configuration with certPEM/keyPEM that asks
// for, and accepts, any client certificate.
func serverConf(t *testing.T, certPEM, keyPEM []byte) *tls.Config {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequestClientCert, NextProtos: []string{"http/1.1"}}
}

// registerOnFakeAPI starts a fakePodAPI and registers a gateway "abcd0123"
// in namespace "ns" on it, all removed at the test's end.
func registerOnFakeAPI(t *testing.T) (*fakePodAPI, *kube.Client, *kube.Gateway) {
	t.Helper()
	api := &fakePodAPI{}
	srv := httptest.NewTLSServer(api)
	t.Cleanup(srv.Close)
	c, err := kube.New(kube.Config{Server: srv.URL, CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	gw, err := kube.Register(context.Background(), c, "ns", "abcd0123", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Abandon)
	return api, c, gw
}

// TestRegistrySendsToTheProxyOnly attacks the gateway's side of the
// registrations: the real values and the interception CA's key go to a
// pod listed with the proxy's labels only if it proves it is the proxy
// (a certificate of the gateway's pod CA naming the proxy). A pod
// labelled like the proxy with its own pod certificate of the same CA
// (any server pod has one), a pod with a certificate naming the proxy
// from another CA, and a pod that speaks no TLS get nothing: neither the
// value nor the CA's key, not even encrypted to them.
func TestRegistrySendsToTheProxyOnly(t *testing.T) {
	const value = "sk-live-0123456789abcdefghij"
	api, c, gw := registerOnFakeAPI(t)
	ctx := context.Background()
	pca, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	other, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	ica, err := egress.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := ica.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	name := kube.ProxyName(gw.ID())
	issue := func(ca *podagent.CA, pod string) *tls.Config {
		cert, key, err := ca.IssuePod(pod)
		if err != nil {
			t.Fatal(err)
		}
		return serverConf(t, cert, key)
	}
	peers := map[string]struct {
		conf *tls.Config
		real bool
	}{
		"proxy":                      {issue(pca, name), true},
		"a pod of the same CA":       {issue(pca, "mcpbox-evil-0a1b2c3d-0e0f10"), false},
		"the proxy's name, other CA": {issue(other, name), false},
		"no TLS":                     {nil, false},
	}
	got := map[string]*registryPeer{}
	var pods []corev1.Pod
	ctrl := true
	port := 0
	for what, pc := range peers {
		l := listenRegistry(t, port)
		_, p, _ := net.SplitHostPort(l.Addr().String())
		port, _ = strconv.Atoi(p)
		got[what] = servePeer(t, l, pc.conf)
		ip, _, _ := net.SplitHostPort(l.Addr().String())
		pods = append(pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + strings.ReplaceAll(what, " ", "-"), Labels: kube.Labels(gw.ID(), "", kube.RoleEgress),
				OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: &ctrl}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
		})
	}
	api.mu.Lock()
	api.pods = pods
	api.mu.Unlock()

	kc := &kubeConn{client: c, gw: gw, ns: "ns"}
	r := proxyRegistry{port: port}
	r.setup(kc, pca, ica, nil)
	r.pods = map[string]egressproxy.Registration{"pod-1": {Pod: "pod-1", Server: "s",
		Credentials: []credinject.Credential{{Name: "T", Value: value, Hosts: []string{"api.example.com"}, Header: "X-Key"}}}}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := r.send(sctx)
	if n != 1 {
		t.Fatalf("%d replicas took the state, want 1 (the proxy): %v", n, err)
	}
	if err == nil || strings.Contains(err.Error(), value) {
		t.Errorf("the impostors' errors: %v", err)
	}
	keyB64 := base64.StdEncoding.EncodeToString(caKey) // as JSON carries it
	for what, p := range got {
		p.mu.Lock()
		seen, puts := p.seen.Bytes(), p.puts
		p.mu.Unlock()
		if !peers[what].real {
			if puts != 0 || bytes.Contains(seen, []byte(value)) || bytes.Contains(seen, []byte(keyB64)) {
				t.Errorf("%s got the state: %d PUTs, %d bytes", what, puts, len(seen))
			}
			continue
		}
		var s egressproxy.State
		if err := json.Unmarshal(seen, &s); err != nil || puts != 1 {
			t.Fatalf("%s: %d PUTs: %v", what, puts, err)
		}
		if !bytes.Equal(s.CAKey, caKey) || len(s.Pods) != 1 || s.Pods[0].Credentials[0].Value != value {
			t.Errorf("%s: the state lacks the CA key or the value: %+v", what, s.Pods)
		}
	}
}

// TestProxyCertificateRenewed: the gateway renews the egress proxy's
// registration certificate two thirds into its life (here a short one):
// into the TLS Secret, replaced, and to the running replica in its
// State, so that the replica still takes the gateway's registrations
// once the first certificate expired, and keeps those it had.
func TestProxyCertificateRenewed(t *testing.T) {
	api, c, gw := registerOnFakeAPI(t)
	ctx := context.Background()
	pca, err := podagent.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	ica, err := egress.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	kc := &kubeConn{client: c, gw: gw, ns: "ns"}
	// Short, but not so short that a loaded machine (CI under -race)
	// slips the renewal, due at 10 s, past the first one's end at 15 s:
	// the gateway could then no longer verify the replica to send it the
	// new one (with the default 90 days, that margin is 30 days). 9 s,
	// with 3 s of margin, was once missed on a machine loaded by other
	// tests.
	kc.egress.certTTL = 15 * time.Second
	// A Secret left by a first start that failed after it: replaced.
	name := kube.ProxyTLSName(gw.ID())
	api.mu.Lock()
	api.secrets = map[string][]byte{name: []byte("stale")}
	api.secretCreates = map[string]int{}
	api.mu.Unlock()
	kc.egress.mu.Lock()
	cert, key, renewAt, err := kc.egress.issueTLS(ctx, kc, pca)
	kc.egress.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(kc.egress.certTTL)

	// The replica, serving the certificate it mounted.
	p, err := egressproxy.New(egressproxy.Options{Config: egressproxy.Config{Key: bytes.Repeat([]byte{1}, 32),
		Servers: map[string]egressproxy.ServerPolicy{"s": {Inject: []string{"api.example.com"}}}}, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	dir := t.TempDir()
	for f, b := range map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": pca.CAPEM()} {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf, err := podagent.ServerTLS(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	l := listenRegistry(t, 0)
	served := make(chan error, 1)
	go func() { served <- p.ServeRegistry(l, conf, io.Discard) }()
	t.Cleanup(func() {
		l.Close()
		<-served
	})
	ip, port, _ := net.SplitHostPort(l.Addr().String())
	ctrl := true
	api.mu.Lock()
	api.pods = []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "proxy-1", Labels: kube.Labels(gw.ID(), "", kube.RoleEgress),
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: &ctrl}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}}}
	api.mu.Unlock()

	kc.inject.port, _ = strconv.Atoi(port)
	kc.inject.setup(kc, pca, ica, nil)
	t.Cleanup(kc.inject.stop)
	kc.egress.mu.Lock()
	kc.egress.startRenewal(kc, pca, renewAt)
	kc.egress.mu.Unlock()
	t.Cleanup(kc.egress.stopRenewal)
	reg := func(pod string) egressproxy.Registration {
		return egressproxy.Registration{Pod: pod, Server: "s",
			Credentials: []credinject.Credential{{Name: "T", Value: "sk-0123456789abcdef0123", Hosts: []string{"api.example.com"}, Header: "X-Key"}}}
	}
	if err := kc.inject.register(ctx, reg("pod-1")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(expires.Add(1100 * time.Millisecond)))
	if n := p.Registered(); n != 1 {
		t.Errorf("%d pods registered after the renewal, want 1: a registration was dropped", n)
	}
	kc.inject.mu.Lock()
	kc.inject.pods["pod-2"] = reg("pod-2")
	kc.inject.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := kc.inject.send(sctx); n != 1 || err != nil {
		t.Fatalf("after the first certificate expired: %d replicas took the state: %v", n, err)
	}
	if n := p.Registered(); n != 2 {
		t.Errorf("%d pods registered, want 2", n)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if got := api.secretCreates[name]; got < 2 {
		t.Errorf("the TLS Secret was created %d times, want the first and a renewal", got)
	}
	if now, _ := pem.Decode(api.secrets[name]); now == nil || bytes.Equal(api.secrets[name], cert) {
		t.Errorf("the TLS Secret holds %q, not a renewed certificate", api.secrets[name])
	}
}
