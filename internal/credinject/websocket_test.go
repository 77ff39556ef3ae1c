package credinject

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"mcpbox/internal/egress"
)

// wsServer is a loopback WebSocket service over TLS (golang.org/x/net's
// server) that accepts a handshake only with the real token, records
// every message, and answers each with an echo that reflects the token.
type wsServer struct {
	srv  *httptest.Server
	port int
	mu   sync.Mutex
	msgs []string    // guarded by mu
	hdrs http.Header // guarded by mu: the last handshake's
}

func startWSServer(t *testing.T, token string) *wsServer {
	t.Helper()
	ws := &wsServer{}
	h := websocket.Server{
		Handshake: func(_ *websocket.Config, r *http.Request) error {
			ws.mu.Lock()
			ws.hdrs = r.Header.Clone()
			ws.mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer "+token {
				return fmt.Errorf("bad token")
			}
			return nil
		},
		Handler: func(c *websocket.Conn) {
			for {
				var m string
				if err := websocket.Message.Receive(c, &m); err != nil {
					return
				}
				ws.mu.Lock()
				ws.msgs = append(ws.msgs, m)
				ws.mu.Unlock()
				reply := fmt.Sprintf("echo %d bytes; your token %s; b64 %s", len(m), token, base64.StdEncoding.EncodeToString([]byte(token)))
				if err := websocket.Message.Send(c, reply); err != nil {
					return
				}
			}
		},
	}
	ws.srv = httptest.NewUnstartedServer(h)
	ws.srv.StartTLS()
	t.Cleanup(ws.srv.Close)
	ws.port = ws.srv.Listener.Addr().(*net.TCPAddr).Port
	return ws
}

func (ws *wsServer) hostPort() string { return "127.0.0.1:" + strconv.Itoa(ws.port) }

func (ws *wsServer) received() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]string(nil), ws.msgs...)
}

// dialThrough opens a TLS connection to hostPort through the rig's proxy
// (CONNECT), trusting the proxy's CA, offering HTTP/1.1 only.
func (r *rig) dialThrough(t *testing.T, hostPort string) *tls.Conn {
	t.Helper()
	c, err := net.DialTimeout("unix", r.sock, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(waitFor))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostPort, hostPort)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || br.Buffered() != 0 {
		c.Close()
		t.Fatalf("CONNECT %s: %v %v", hostPort, resp, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(r.ca.Certificate())
	host, _, _ := net.SplitHostPort(hostPort)
	tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: host, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	return tc
}

// wsDial opens a WebSocket to hostPort through the proxy with the given
// Authorization.
func (r *rig) wsDial(t *testing.T, hostPort, auth string) (*websocket.Conn, error) {
	t.Helper()
	cfg, err := websocket.NewConfig("wss://"+hostPort+"/ws", "https://"+hostPort)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Header = http.Header{"Authorization": {auth}, "Sec-Websocket-Extensions": {"permessage-deflate"}}
	return websocket.NewClient(cfg, r.dialThrough(t, hostPort))
}

// wsWorld is newWorld with WebSocket services for A (GH) and B (SLACK).
func wsWorld(t *testing.T, body bool) (*rig, *wsServer, *wsServer) {
	a, b := startWSServer(t, realA), startWSServer(t, realB)
	roots := x509.NewCertPool()
	roots.AddCert(a.srv.Certificate())
	roots.AddCert(b.srv.Certificate())
	var rules []egress.Rule
	for _, s := range []*wsServer{a, b} {
		rules = append(rules, egress.Rule{Host: "127.0.0.1", Ports: []int{s.port}})
	}
	r := startRig(t, roots, rules,
		Credential{Name: "GH", Value: realA, Hosts: []string{a.hostPort()}, Header: "Authorization", Format: "Bearer {value}", Body: body},
		Credential{Name: "SLACK", Value: realB, Hosts: []string{b.hostPort()}, Header: "Authorization", Format: "Bearer {value}"})
	return r, a, b
}

// TestWebSocketInjected: a WebSocket to an inject host through the
// intercepting proxy gets the value in its handshake (the service
// accepts only the real token), its messages reach the service (the own
// placeholder substituted with body: true, also where it straddles the
// proxy's reads of a large frame), the service's echo of the token
// reaches the client redacted, and no extension is negotiated.
func TestWebSocketInjected(t *testing.T) {
	r, a, _ := wsWorld(t, true)
	ph, _ := r.set.Placeholder("GH")
	c, err := r.wsDial(t, a.hostPort(), "Bearer "+ph)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	a.mu.Lock()
	hdrs := a.hdrs
	a.mu.Unlock()
	if hdrs.Get("Sec-Websocket-Extensions") != "" {
		t.Errorf("extensions reached the service: %q", hdrs.Get("Sec-Websocket-Extensions"))
	}
	big := []byte(strings.Repeat("x", 200<<10))
	for _, at := range []int{16<<10 - 3, 32<<10 - 7, 64<<10 - 20, 128<<10 + 1} {
		copy(big[at:], ph)
	}
	msgs := []string{"hello", "token=" + ph, string(big)}
	for _, m := range msgs {
		if err := websocket.Message.Send(c, m); err != nil {
			t.Fatal(err)
		}
		var reply string
		if err := websocket.Message.Receive(c, &reply); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(reply, realA) || strings.Contains(reply, base64.StdEncoding.EncodeToString([]byte(realA))) {
			t.Fatalf("the reply carries the value: %q", reply)
		}
		if want := fmt.Sprintf("echo %d bytes; your token [REDACTED:GH]; b64 [REDACTED:GH]", len(m)); reply != want {
			t.Fatalf("reply %q, want %q", reply, want)
		}
	}
	c.Close()
	got := a.received()
	if len(got) != 3 || got[0] != "hello" || got[1] != "token="+realA {
		t.Fatalf("service received %.80q", got)
	}
	if strings.Contains(got[2], ph) || strings.Count(got[2], realA) != 4 || len(got[2]) != len(big) {
		t.Errorf("large message: %d placeholders, %d values upstream (want 0, 4), length %d", strings.Count(got[2], ph), strings.Count(got[2], realA), len(got[2]))
	}
	inj := r.log.find("inject")
	if len(inj) != 2 || inj[0].Where != "header Authorization" || inj[1].Where != "websocket" {
		t.Errorf("inject events %+v", inj)
	}
}

// TestWebSocketPlaceholderElsewhereRefused: another credential's
// placeholder in the handshake is refused as in any request (no upgrade,
// the service never sees it); in a message, it ends the connection
// before the frame leaves, with a close frame to the client, and is
// recorded. The own placeholder without body: true stays a placeholder.
func TestWebSocketPlaceholderElsewhereRefused(t *testing.T) {
	r, a, b := wsWorld(t, false)
	phA, _ := r.set.Placeholder("GH")
	phB, _ := r.set.Placeholder("SLACK")
	if _, err := r.wsDial(t, b.hostPort(), "Bearer "+phA); err == nil || !strings.Contains(err.Error(), "bad status") {
		t.Errorf("handshake to B with A's placeholder: %v", err)
	}
	b.mu.Lock()
	if b.hdrs != nil {
		t.Errorf("B saw the handshake: %v", b.hdrs)
	}
	b.mu.Unlock()

	c, err := r.wsDial(t, a.hostPort(), "Bearer "+phA)
	if err != nil {
		t.Fatal(err)
	}
	var reply string
	if err := websocket.Message.Send(c, "mine "+phA); err != nil {
		t.Fatal(err)
	}
	if err := websocket.Message.Receive(c, &reply); err != nil {
		t.Fatal(err)
	}
	// B's placeholder cut across two frames: the first leaves, the
	// second does not.
	c.PayloadType = websocket.TextFrame
	if _, err := c.Write([]byte("part " + phB[:10])); err != nil {
		t.Fatal(err)
	}
	websocket.Message.Receive(c, &reply)
	c.Write([]byte(phB[10:] + " end"))
	var m string
	err = websocket.Message.Receive(c, &m)
	if err == nil {
		t.Fatalf("the connection survived a foreign placeholder: %q", m)
	}
	got := a.received()
	if len(got) < 1 || got[0] != "mine "+phA {
		t.Errorf("own placeholder without body: true: service got %q", got)
	}
	for _, m := range got {
		if strings.Contains(m, phB) || strings.Contains(m, phB[10:]) {
			t.Errorf("the service received B's placeholder: %q", m)
		}
	}
	// The proxy's record of the connection names the refusal.
	deadline := time.Now().Add(waitFor)
	for {
		r.log.mu.Lock()
		var reason string
		for _, e := range r.log.egs {
			if e.Intercepted && e.Port == a.port && strings.Contains(e.Reason, "placeholder of credential SLACK in the websocket message") {
				reason = e.Reason
			}
		}
		r.log.mu.Unlock()
		if reason != "" {
			break
		}
		if time.Now().After(deadline) {
			r.log.mu.Lock()
			t.Fatalf("no egress event names the refusal: %+v", r.log.egs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ex := r.log.find("exfiltration")
	if len(ex) != 2 || ex[0].Where != "header Authorization" || ex[1].Credential != "SLACK" || ex[1].Where != "websocket message" || ex[1].Port != a.port {
		t.Errorf("exfiltration events %+v", ex)
	}
	if n := len(r.log.find("inject")); n != 1 {
		t.Errorf("%d inject events, want 1 (the handshake)", n)
	}
}

// rawWSServer answers a WebSocket handshake by hand (with extensions if
// ext is set) and then sends frames as given.
func rawWSServer(t *testing.T, ext string, frames ...[]byte) (string, *x509.Certificate) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n")
		if ext != "" {
			fmt.Fprintf(brw, "Sec-WebSocket-Extensions: %s\r\n", ext)
		}
		brw.WriteString("\r\n")
		for _, f := range frames {
			brw.Write(f)
		}
		brw.Flush()
		conn.SetReadDeadline(time.Now().Add(waitFor))
		io.Copy(io.Discard, conn) // until the client goes
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), srv.Certificate()
}

// readFrames reads frames from a client-side connection until a close
// frame: the data messages reassembled, and the control payloads.
func readFrames(t *testing.T, br *bufio.Reader) (msgs []string, ctl []string, frags int) {
	t.Helper()
	var cur []byte
	for {
		h, err := readFrameHead(br)
		if err != nil {
			t.Fatalf("reading frames: %v (so far %q)", err, msgs)
		}
		p := make([]byte, h.length)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatal(err)
		}
		if h.masked {
			t.Fatal("a masked frame to the client")
		}
		if h.op >= 8 {
			ctl = append(ctl, string(p))
			if h.op == opClose {
				return msgs, ctl, frags
			}
			continue
		}
		frags++
		cur = append(cur, p...)
		if h.fin {
			msgs, cur = append(msgs, string(cur)), nil
		}
	}
}

// TestWebSocketServerFramesRedacted: the value cut across the fragments of
// a server's message, and in a ping, reaches the client redacted; an
// unfragmented message stays one frame.
func TestWebSocketServerFramesRedacted(t *testing.T) {
	const textOp, pingOp = 1, 9
	addr, cert := rawWSServer(t, "",
		frame(true, textOp, []byte("single "+realA)),
		frame(false, textOp, []byte("frag one "+realA[:15])),
		frame(true, pingOp, []byte("ping "+realA)),
		frame(false, opCont, []byte(realA[15:30])),
		frame(true, opCont, []byte(realA[30:]+" done")),
		// A slice of the value, in a message and in a ping.
		frame(true, textOp, []byte("slice "+realA[6:30]+" end")),
		frame(true, pingOp, []byte("p "+realA[5:])),
		frame(true, opClose, binary.BigEndian.AppendUint16(nil, 1000)),
	)
	r := wsRig(t, addr, cert,
		Credential{Name: "GH", Value: realA, Hosts: []string{addr}, Header: "Authorization", Format: "Bearer {value}"})
	_, br := r.wsUpgrade(t, addr)
	msgs, ctl, frags := readFrames(t, br)
	want := []string{"single [REDACTED:GH]", "frag one [REDACTED:GH] done", "slice [REDACTED:GH] end"}
	if fmt.Sprint(msgs) != fmt.Sprint(want) {
		t.Errorf("messages %q, want %q", msgs, want)
	}
	if len(ctl) != 3 || ctl[0] != "ping [REDACTED:GH]" || ctl[1] != "p [REDACTED:GH]" {
		t.Errorf("control payloads %q", ctl)
	}
	if frags < 2 {
		t.Errorf("%d data frames", frags)
	}
}

// TestWebSocketExtensionRefused: a service that negotiates an extension
// the proxy did not ask for (compressed frames could not be scanned) is
// answered 502, never switched.
func TestWebSocketExtensionRefused(t *testing.T) {
	addr, cert := rawWSServer(t, "permessage-deflate", frame(true, 1, []byte("x")))
	r := wsRig(t, addr, cert,
		Credential{Name: "GH", Value: realA, Hosts: []string{addr}, Header: "Authorization", Format: "Bearer {value}"})
	tc := r.dialThrough(t, addr)
	fmt.Fprintf(tc, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n", addr)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "extensions") {
		t.Errorf("%d %q, want 502 naming the extensions", resp.StatusCode, body)
	}
}

// TestWebSocketRefusalCloseFrame: the client whose message carries
// another credential's placeholder gets a close frame with 1008 (policy
// violation) before the connection ends.
func TestWebSocketRefusalCloseFrame(t *testing.T) {
	addr, cert := rawWSServer(t, "")
	r := wsRig(t, addr, cert,
		Credential{Name: "GH", Value: realA, Hosts: []string{addr}, Header: "Authorization", Format: "Bearer {value}"},
		Credential{Name: "SLACK", Value: realB, Hosts: []string{"127.0.0.1:1"}, Header: "Authorization"})
	phB, _ := r.set.Placeholder("SLACK")
	tc, br := r.wsUpgrade(t, addr)
	payload := []byte("leak " + phB)
	key := [4]byte{1, 2, 3, 4}
	mask(payload, key, 0)
	tc.Write(append([]byte{0x81, 0x80 | byte(len(payload)), 1, 2, 3, 4}, payload...))
	_, ctl, _ := readFrames(t, br)
	if len(ctl) != 1 || len(ctl[0]) < 2 || binary.BigEndian.Uint16([]byte(ctl[0])) != 1008 {
		t.Fatalf("control frames %q, want one close with 1008", ctl)
	}
}

// TestWebSocketValueSplitAcrossMessages: a value (or its base64) that the
// server splits across messages, whole or fragmented, does not reach the
// client: the rest in the later message is replaced by the mark, and so
// is a beginning longer than maxSplitLeak at the end of the earlier one.
// Messages that only look like the start of a value pass unchanged.
func TestWebSocketValueSplitAcrossMessages(t *testing.T) {
	const textOp, binOp = 1, 2
	b64 := base64.StdEncoding.EncodeToString([]byte(realA))
	addr, cert := rawWSServer(t, "",
		frame(true, textOp, []byte("a "+realA[:12])), // long beginning: replaced
		frame(true, textOp, []byte(realA[12:]+" b")),
		frame(true, textOp, []byte("c "+realA[:5])), // short beginning: passes
		frame(true, binOp, []byte(realA[5:]+" d")),
		frame(true, textOp, []byte(realA[:4])), // over three messages
		frame(true, textOp, []byte(realA[4:14])),
		frame(true, textOp, []byte(realA[14:]+" e")),
		frame(true, textOp, []byte("f "+realA[:20])), // the rest fragmented
		frame(false, textOp, []byte(realA[20:25])),
		frame(true, 9, []byte("ping")),
		frame(true, opCont, []byte(realA[25:]+" g")),
		frame(true, textOp, []byte("h "+realA[:1])), // looks like a start
		frame(true, textOp, []byte("unrelated")),
		frame(true, textOp, []byte("i "+b64[:20])),
		frame(true, textOp, []byte(b64[20:]+" j")),
		frame(true, opClose, binary.BigEndian.AppendUint16(nil, 1000)),
	)
	r := wsRig(t, addr, cert,
		Credential{Name: "GH", Value: realA, Hosts: []string{addr}, Header: "Authorization", Format: "Bearer {value}"})
	_, br := r.wsUpgrade(t, addr)
	msgs, _, _ := readFrames(t, br)
	const mark = "[REDACTED:GH]"
	want := []string{
		"a " + mark, mark + " b",
		"c " + realA[:5], mark + " d",
		realA[:4], mark, mark + " e",
		"f " + mark, mark + " g",
		"h " + realA[:1], "unrelated",
	}
	if len(msgs) != len(want)+2 || fmt.Sprint(msgs[:len(want)]) != fmt.Sprint(want) {
		t.Fatalf("messages\n %q\nwant\n %q and two more", msgs, want)
	}
	i, j := msgs[len(want)], msgs[len(want)+1]
	if !strings.HasPrefix(i, "i "+mark) || !strings.Contains(j, mark) || !strings.HasSuffix(j, " j") {
		t.Errorf("base64 split: %q, %q", i, j)
	}
	// However split, no 8 bytes of a form went out in one piece.
	all := strings.Join(msgs, "")
	for _, form := range []string{realA, b64} {
		for k := 0; k+8 <= len(form); k++ {
			if strings.Contains(all, form[k:k+8]) {
				t.Fatalf("%q of a form reached the client: %q", form[k:k+8], msgs)
			}
		}
	}
}

// TestWebSocketShortValueSplitLeaksLittle: the beginning of a value that
// may pass at the end of a message is a small part of it: for a short
// value (64 random bits and a few more in 16 letters and digits), the 7
// bytes maxSplitLeak lets through would leave 9 to guess (through the redactor
// itself: an echoed guess comes back marked only if it is right), so a
// beginning of more than a quarter of the form is replaced as a longer
// one is.
func TestWebSocketShortValueSplitLeaksLittle(t *testing.T) {
	const textOp, short = 1, "Zq3xK9pWm7TbR2vL"
	var frames [][]byte
	for k := 1; k < len(short); k++ {
		frames = append(frames, frame(true, textOp, []byte("x "+short[:k])), frame(true, textOp, []byte(short[k:]+" y")))
	}
	frames = append(frames, frame(true, opClose, binary.BigEndian.AppendUint16(nil, 1000)))
	addr, cert := rawWSServer(t, "", frames...)
	r := wsRig(t, addr, cert,
		Credential{Name: "K", Value: short, Hosts: []string{addr}, Header: "X-Key"})
	_, br := r.wsUpgrade(t, addr)
	msgs, _, _ := readFrames(t, br)
	if len(msgs) != len(frames)-1 {
		t.Fatalf("%d messages, want %d: %q", len(msgs), len(frames)-1, msgs)
	}
	most := len(short) / 4
	for _, m := range msgs {
		for k := 0; k+most+1 <= len(short); k++ {
			if strings.Contains(m, short[k:k+most+1]) {
				t.Fatalf("%q of the %d-byte value reached the client: %q", short[k:k+most+1], len(short), msgs)
			}
		}
	}
}

// wsRig starts a rig whose egress allows the loopback port of addr, the
// raw WebSocket server whose certificate is cert.
func wsRig(t *testing.T, addr string, cert *x509.Certificate, creds ...Credential) *rig {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return startRig(t, roots, []egress.Rule{{Host: "127.0.0.1", Ports: []int{p}}}, creds...)
}

// wsUpgrade opens a connection through the proxy to addr and completes
// a WebSocket handshake (no extensions) on it.
func (r *rig) wsUpgrade(t *testing.T, addr string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	tc := r.dialThrough(t, addr)
	fmt.Fprintf(tc, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", addr)
	br := bufio.NewReader(tc)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	return tc, br
}
