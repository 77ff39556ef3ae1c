package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// injWS is a loopback WebSocket service over TLS that accepts a
// handshake only with want as its bearer token and answers each message
// with an echo that reflects that token.
type injWS struct {
	port int
	mu   sync.Mutex
	log  []string // guarded by mu: handshake Authorization values and messages
}

func (s *injWS) seen() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

func injWSServe(t *testing.T, cert *tls.Certificate, want string) *injWS {
	t.Helper()
	s := &injWS{}
	h := websocket.Server{
		Handshake: func(_ *websocket.Config, r *http.Request) error {
			s.mu.Lock()
			s.log = append(s.log, "handshake "+r.Header.Get("Authorization"))
			s.mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer "+want {
				return fmt.Errorf("want the real token")
			}
			return nil
		},
		Handler: func(c *websocket.Conn) {
			for {
				var m string
				if websocket.Message.Receive(c, &m) != nil {
					return
				}
				s.mu.Lock()
				s.log = append(s.log, "message "+m)
				s.mu.Unlock()
				if websocket.Message.Send(c, fmt.Sprintf("echo %q; you are %s", m, want)) != nil {
					return
				}
			}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{*cert}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return s
}

// TestInjectWebSocket: a server in a sandbox of `mcpbox serve` opens a
// WebSocket to a loopback service that requires the real token: the
// handshake gets it at the proxy, the messages go both ways, and the
// service's echo of the token reaches the sandbox redacted. T's
// placeholder sent in a message over a WebSocket to U's host ends that
// connection before the message reaches the service, and is audited.
func TestInjectWebSocket(t *testing.T) {
	caPEM, cert := injCA(t)
	realT, realU := injToken(t), injToken(t)
	wsT, wsU := injWSServe(t, cert, realT), injWSServe(t, cert, realU)
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", fmt.Sprintf(`    tools: {allow: ["*"]}
    network:
      egress: [{host: 127.0.0.1, ports: [%d, %d]}]
    secrets:
      T:
        from: env:INJ_T
        inject: {hosts: ["127.0.0.1:%d"], header: Authorization, format: "Bearer {value}"}
      U:
        from: env:INJ_U
        inject: {hosts: ["127.0.0.1:%d"], header: Authorization, format: "Bearer {value}"}
`, wsT.port, wsU.port, wsT.port, wsU.port))
		caFile := s.dir + "/ca.pem"
		m.writeFile(t, caFile, caPEM, 0o644)
		g := gwServe(t, m, s.cfg, auTokenEnv+"="+s.token, "INJ_T="+realT, "INJ_U="+realU, "SSL_CERT_FILE="+caFile)
		sess := s.connect(t, g, nil)
		call := func(args map[string]any) string {
			t.Helper()
			c := await(t, callAsync(sess, "ws_echo", args))
			if c.err != nil || c.res.IsError {
				t.Fatalf("ws_echo: %v %s", c.err, gwText(c.res))
			}
			return gwText(c.res)
		}
		ph := gwMustCall(t, sess, "getenv", map[string]any{"text": "T"}, "")
		if ph == realT || len(ph) != len(realT) {
			t.Fatalf("T in the sandbox = %q: want a placeholder", ph)
		}

		got := call(map[string]any{"url": fmt.Sprintf("wss://127.0.0.1:%d/stream", wsT.port),
			"headers": map[string]string{"Authorization": "Bearer ${T}"}, "messages": []string{"hello", "mine ${T}"}})
		want := fmt.Sprintf("echo %q; you are [REDACTED:T]\necho %q; you are [REDACTED:T]", "hello", "mine "+ph)
		if got != want || strings.Contains(got, realT) {
			t.Fatalf("ws_echo through the proxy:\n%s\nwant\n%s", got, want)
		}
		if seen := wsT.seen(); !strings.Contains(seen, "handshake Bearer "+realT) || !strings.Contains(seen, "message mine "+ph) {
			t.Fatalf("the service saw:\n%s", seen)
		}

		// T's placeholder in a message to U's host: the connection ends.
		got = call(map[string]any{"url": fmt.Sprintf("wss://127.0.0.1:%d/stream", wsU.port),
			"headers": map[string]string{"Authorization": "Bearer ${U}"}, "messages": []string{"first", "leak ${T}"}})
		if !strings.HasPrefix(got, fmt.Sprintf("echo %q; you are [REDACTED:U]\nclosed: ", "first")) {
			t.Fatalf("T's placeholder over U's WebSocket: %q, want the connection closed after the first echo", got)
		}
		if seen := wsU.seen(); strings.Contains(seen, ph) || !strings.Contains(seen, "message first") {
			t.Fatalf("U's service saw:\n%s", seen)
		}
		gwClose(t, sess)
		g.stop(t)

		var exfil []auRecord
		inject := 0
		for _, rec := range s.logs(t) {
			switch rec.str("event") {
			case "secret_exfiltration":
				exfil = append(exfil, rec)
			case "secret_inject":
				inject++
			}
		}
		if inject != 2 || len(exfil) != 1 {
			t.Fatalf("%d secret_inject and %v secret_exfiltration records, want 2 and 1", inject, exfil)
		}
		if d, _ := exfil[0]["detail"].(map[string]any); d["secret"] != "T" || d["where"] != "websocket message" || d["port"] != fmt.Sprint(wsU.port) {
			t.Fatalf("secret_exfiltration record: %v", exfil[0])
		}
	})
}
