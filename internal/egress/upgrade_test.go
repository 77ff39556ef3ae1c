package egress

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// upgradeServer switches a WebSocket handshake that carries the
// Injector's header to a raw stream that echoes in upper case.
func upgradeServer(t *testing.T) (*x509.CertPool, int) {
	srv, port := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 || r.Header.Get("Upgrade") != "websocket" || r.Header.Get("X-Injected") == "" {
			http.Error(w, fmt.Sprintf("want an injected HTTP/1.1 upgrade, got %s %v", r.Proto, r.Header), http.StatusBadRequest)
			return
		}
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		conn.SetDeadline(time.Now().Add(waitFor))
		buf := make([]byte, 512)
		for {
			n, err := brw.Read(buf)
			if n > 0 {
				conn.Write(bytes.ToUpper(buf[:n]))
			}
			if err != nil {
				return
			}
		}
	})
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return roots, port
}

// TestInterceptUpgrade: a WebSocket handshake inside an intercepted
// connection is shown to the Injector, goes upstream over HTTP/1.1 (the
// upstream offers h2), and the switched connection is relayed both ways
// through the filter's body; a refused handshake is answered 403; the
// relay ends at MaxDuration with the session's reason, leaving nothing
// open.
func TestInterceptUpgrade(t *testing.T) {
	checkNoLeak(t)
	roots, port := upgradeServer(t)
	ca, _ := NewCA("test")
	ev := newEvents()
	p, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Injector: fakeInjector{port: port}, CA: ca, RootCAs: roots, Log: ev.log,
		// Long enough for both handshakes and the two messages on a
		// loaded host, which all run inside the session's maximum.
		Limits: Limits{MaxDuration: 3 * time.Second},
	})
	caPool := x509.NewCertPool()
	caPool.AddCert(ca.Certificate())
	client := tlsProxyClient(t, sock, caPool, false)
	client.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}

	req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/ws", port), nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("X-Refuse", "1")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "told to") {
		t.Fatalf("refused handshake: %d %q", resp.StatusCode, body)
	}
	ev.next(t)

	req.Header.Del("X-Refuse")
	start := time.Now()
	// The transport itself: Client.Timeout would wrap the switched body
	// in a read-only one.
	resp, err = client.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("X-Filtered") != "yes" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("handshake: %d %v %q", resp.StatusCode, resp.Header, b)
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatal("101 body is not writable")
	}
	br := bufio.NewReader(rw)
	for _, m := range []string{"hello\n", "again\n"} {
		if _, err := io.WriteString(rw, m); err != nil {
			t.Fatal(err)
		}
		got, err := br.ReadString('\n')
		if err != nil || got != strings.ToUpper(m) {
			t.Fatalf("relayed %q, %v; want %q", got, err, strings.ToUpper(m))
		}
	}
	// Idle now: the session's maximum duration ends it.
	if _, err := br.ReadString('\n'); err == nil {
		t.Fatal("the relay outlived the session")
	}
	if d := time.Since(start); d > waitFor {
		t.Fatalf("the relay ended after %v", d)
	}
	e := ev.next(t)
	if e.Reason != ErrMaxDuration.Error() || !e.Intercepted {
		t.Errorf("event %+v, want the maximum duration", e)
	}
	if n := p.ActiveConns(); n != 0 {
		t.Errorf("%d connections open", n)
	}
}

// TestInterceptUpgradeIdle: a switched connection whose client stops
// reading while the server floods it ends once nothing has moved for the
// idle timeout, with that reason, leaving nothing open.
func TestInterceptUpgradeIdle(t *testing.T) {
	checkNoLeak(t)
	srv, port := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		conn.SetWriteDeadline(time.Now().Add(waitFor))
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := conn.Write(chunk); err != nil {
				return
			}
		}
	})
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	ca, _ := NewCA("test")
	ev := newEvents()
	p, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Injector: fakeInjector{port: port}, CA: ca, RootCAs: roots, Log: ev.log,
		// Above a loaded host's pause while the proxy makes the leaf
		// certificate mid-handshake, when nothing moves either.
		Limits: Limits{IdleTimeout: 2 * time.Second},
	})
	caPool := x509.NewCertPool()
	caPool.AddCert(ca.Certificate())
	client := tlsProxyClient(t, sock, caPool, false)
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/ws", port), nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := client.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %d", resp.StatusCode)
	}
	// Never read: the relay fills the buffers and stalls.
	e := ev.next(t)
	if e.Reason != ErrIdle.Error() {
		t.Errorf("event %+v, want the idle timeout", e)
	}
	if n := p.ActiveConns(); n != 0 {
		t.Errorf("%d connections open", n)
	}
}
