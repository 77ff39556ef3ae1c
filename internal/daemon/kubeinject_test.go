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
}

func (f *fakePodAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	api := &fakePodAPI{}
	srv := httptest.NewTLSServer(api)
	t.Cleanup(srv.Close)
	c, err := kube.New(kube.Config{Server: srv.URL, CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	gw, err := kube.Register(ctx, c, "ns", "abcd0123", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Abandon)
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
