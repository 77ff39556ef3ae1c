//go:build linux

package podagent

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// hostilePod is a pod whose agent was replaced (its server holds the
// pod's key and the agent's port): it passes the gateway's name check,
// and answers as handle says.
func hostilePod(t *testing.T, ca *CA, name string, handle http.HandlerFunc) string {
	t.Helper()
	certPEM, keyPEM, err := ca.IssuePod(name)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handle, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool, NextProtos: []string{"h2", "http/1.1"}},
		ErrorLog: nil}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// plainListener records what reaches it: a place a hostile pod would
// send the gateway.
func plainListener(t *testing.T) (addr string, got func() []string) {
	t.Helper()
	var mu sync.Mutex
	var reqs []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mu.Lock()
		reqs = append(reqs, r.Method+" "+r.URL.Path+" "+string(body))
		mu.Unlock()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), reqs...)
	}
}

// TestConnectFollowsNoRedirect: a pod that answers with a redirect
// (to plain HTTP, anywhere) gets neither the start's secrets nor the
// gateway's messages sent there: the gateway would otherwise make
// requests from its own network position for the pod.
func TestConnectFollowsNoRedirect(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	plain, got := plainListener(t)
	secret := random(t)
	for _, at := range []string{"/v1/start", "/mcp"} {
		t.Run(at, func(t *testing.T) {
			addr := hostilePod(t, ca, "pod-h", func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == at && r.Method == http.MethodPost:
					http.Redirect(w, r, "http://"+plain+"/stolen"+at, http.StatusTemporaryRedirect)
				case r.URL.Path == "/v1/start":
					io.WriteString(w, "{}\n")
				case r.Method == http.MethodGet:
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					http.NewResponseController(w).Flush()
					<-r.Context().Done()
				default:
					http.Error(w, "no", http.StatusBadRequest)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := Connect(ctx, addr, "pod-h", ca, StartRequest{Env: map[string]string{"S": secret}})
			if err == nil {
				msg, _ := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: mustID(t, float64(1)), Method: "ping"})
				req, _ := jsonrpc.DecodeMessage(msg)
				c.Write(ctx, req)
				rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
				c.Read(rctx)
				rcancel()
				c.Close()
			}
			for _, r := range got() {
				if strings.Contains(r, at) {
					t.Errorf("the gateway followed the pod's redirect of %s to plain HTTP: %q", at, r)
				}
			}
		})
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestConnectBoundsAnswers: a pod that answers a POST with an endless
// JSON body fails the connection once the message limit is passed; the
// gateway does not read (and hold) it all.
func TestConnectBoundsAnswers(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	const max = 64 << 10
	const sent = 64 << 20
	var wrote atomic.Int64
	addr := hostilePod(t, ca, "pod-h", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/start":
			io.WriteString(w, "{}\n")
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
		default:
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			chunk := []byte(`{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("A", 32<<10))
			for wrote.Load() < sent {
				n, err := w.Write(chunk)
				wrote.Add(int64(n))
				if err != nil {
					return
				}
				chunk = []byte(strings.Repeat("A", 32<<10))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ConnectMax(ctx, addr, "pod-h", ca, StartRequest{}, max)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg, _ := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: mustID(t, float64(1)), Method: "ping"})
	req, _ := jsonrpc.DecodeMessage(msg)
	if err := c.Write(ctx, req); err != nil {
		t.Logf("write: %v", err)
	}
	if m, err := c.Read(ctx); err == nil {
		t.Errorf("read a message from an endless answer: %T", m)
	}
	// Flow control lets a few windows more leave the pod than the gateway
	// read; far from all of it.
	if n := wrote.Load(); n >= sent {
		t.Errorf("the pod wrote all %d bytes of its answer: the gateway read past its %d-byte limit", n, max)
	}
}

// TestServerStderrRedacted: what the server writes to stderr reaches the
// pod's log (the node keeps it; `kubectl logs` shows it to whoever may
// read logs, not only to whoever may read secrets) with the start's
// secrets redacted: an environment value, one written in two pieces, a
// secret file's content.
func TestServerStderrRedacted(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	secret := random(t)
	fileBody := "line-one-" + random(t) + "\nline-two-" + random(t) + "\n"
	script := `echo "token=$S" >&2
printf '%s' "$S" | cut -c1-16 | tr -d '\n' >&2; sleep 0.2; printf '%s' "$S" | cut -c17- >&2
printf 'key: ' >&2; cat "$SECRETS/key.pem" >&2
echo END >&2
exec sleep 30`
	p := startPodCommand(t, "pod-log", ca, []string{"/bin/sh", "-c", script})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, p.addr, p.name, ca, StartRequest{
		Env:   map[string]string{"S": secret, "SECRETS": p.secrets},
		Files: map[string][]byte{"key.pem": []byte(fileBody)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.waitLog(t, "END")
	log := p.log()
	for _, leak := range []string{secret, secret[:16], secret[16:], strings.Split(fileBody, "\n")[0]} {
		if strings.Contains(log, leak) {
			t.Errorf("the pod's log holds a secret (%q):\n%s", leak, log)
		}
	}
	for _, want := range []string{"token=[REDACTED:S]", "key: [REDACTED:key.pem]"} {
		if !strings.Contains(log, want) {
			t.Errorf("the pod's log lacks %q:\n%s", want, log)
		}
	}
}
