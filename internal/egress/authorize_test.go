package egress

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// authFront starts a front proxy whose Authorize hands user a (password
// pa) to proxy A and b (pb) to proxy B; each allows one loopback port.
type authFront struct {
	sock       string
	a, b       *Proxy
	front, evA *events
	evB        *events
	froms      chan net.Addr
}

func startAuthFront(t *testing.T, portA, portB int, limitsA Limits) *authFront {
	t.Helper()
	f := &authFront{front: newEvents(), evA: newEvents(), evB: newEvents(), froms: make(chan net.Addr, 64)}
	var err error
	if f.a, err = New(Options{SandboxID: "A", Rules: []Rule{{CIDR: netip.MustParsePrefix("127.0.0.1/32"), Ports: []int{portA}}},
		Limits: limitsA, Log: f.evA.log}); err != nil {
		t.Fatal(err)
	}
	if f.b, err = New(Options{SandboxID: "B", Rules: []Rule{{CIDR: netip.MustParsePrefix("127.0.0.1/32"), Ports: []int{portB}}},
		Log: f.evB.log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.a.Close(); f.b.Close() })
	creds := map[string]struct {
		pass string
		p    *Proxy
	}{"a": {"pa", f.a}, "b": {"pb", f.b}}
	_, f.sock = startProxy(t, Options{SandboxID: "front", Log: f.front.log,
		Authorize: func(user, pass string, from net.Addr) (*Proxy, error) {
			f.froms <- from
			c, ok := creds[user]
			if !ok || c.pass != pass {
				return nil, fmt.Errorf("user %q: bad credentials", user)
			}
			return c.p, nil
		}})
	return f
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// connectAuth sends CONNECT target with the Proxy-Authorization header
// auth (none if empty) and returns the connection and the reply.
func connectAuth(t *testing.T, sock, target, auth string) (net.Conn, *http.Response) {
	t.Helper()
	c := dialUnix(t, sock)
	hdr := ""
	if auth != "" {
		hdr = "Proxy-Authorization: " + auth + "\r\n"
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, hdr)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("reading CONNECT reply for %s: %v", target, err)
	}
	return c, resp
}

func TestAuthorizeSelectsTheClientsProxy(t *testing.T) {
	checkNoLeak(t)
	portA, portB := startEcho(t, "127.0.0.1:0"), startEcho(t, "127.0.0.1:0")
	f := startAuthFront(t, portA, portB, Limits{})
	targetA, targetB := fmt.Sprintf("127.0.0.1:%d", portA), fmt.Sprintf("127.0.0.1:%d", portB)

	c, resp := connectAuth(t, f.sock, targetA, basic("a", "pa"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a to its own target: %s", resp.Status)
	}
	echoOnce(t, c, "hello from a")
	c.Close()
	ev := f.evA.next(t)
	if ev.SandboxID != "A" || ev.Decision != "allow" || ev.Port != portA || ev.BytesUp != 12 || ev.BytesDown != 12 {
		t.Errorf("A's event = %+v", ev)
	}
	if from := <-f.froms; from == nil || from.Network() != "unix" {
		t.Errorf("Authorize got client address %v", from)
	}

	// a's credentials do not open b's allowlist: A's policy decides.
	_, resp = connectAuth(t, f.sock, targetB, basic("a", "pa"))
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "no rule allows") {
		t.Errorf("a to b's target: %s %q", resp.Status, body)
	}
	if ev := f.evA.next(t); ev.Decision != "deny" || ev.Port != portB || ev.SandboxID != "A" {
		t.Errorf("A's denial event = %+v", ev)
	}
	c, resp = connectAuth(t, f.sock, targetB, basic("b", "pb"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("b to its own target: %s", resp.Status)
	}
	echoOnce(t, c, "b")
	c.Close()
	if ev := f.evB.next(t); ev.SandboxID != "B" || ev.Decision != "allow" {
		t.Errorf("B's event = %+v", ev)
	}
	select {
	case ev := <-f.front.ch:
		t.Errorf("the front logged an authorized connection: %+v", ev)
	default:
	}
}

func TestAuthorizeRefuses(t *testing.T) {
	checkNoLeak(t)
	portA := startEcho(t, "127.0.0.1:0")
	f := startAuthFront(t, portA, portA, Limits{})
	target := fmt.Sprintf("127.0.0.1:%d", portA)
	for _, tc := range []struct{ name, auth, want string }{
		{"none", "", "no proxy credentials"},
		{"wrong password", basic("a", "pb"), `user "a": bad credentials`},
		{"unknown user", basic("c", "pa"), `user "c": bad credentials`},
		{"not basic", "Bearer pa", "no proxy credentials"},
		{"not base64", "Basic !!!", "no proxy credentials"},
		{"no colon", "Basic " + base64.StdEncoding.EncodeToString([]byte("apa")), "no proxy credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp := connectAuth(t, f.sock, target, tc.auth)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusProxyAuthRequired || !strings.Contains(string(body), tc.want) ||
				resp.Header.Get("Proxy-Authenticate") != `Basic realm="mcpbox"` {
				t.Errorf("reply %s %q %v", resp.Status, body, resp.Header)
			}
			ev := f.front.next(t)
			if ev.Decision != "deny" || ev.SandboxID != "front" || ev.Kind != "connect" || ev.Port != portA ||
				!strings.Contains(ev.Reason, "proxy authorization: "+tc.want) || ev.BytesUp != 0 {
				t.Errorf("front event = %+v", ev)
			}
			if strings.Contains(ev.Reason, "pb") && tc.name == "wrong password" {
				t.Errorf("the event carries the password: %q", ev.Reason)
			}
		})
	}
	// SOCKS carries no credentials: refused before any dial.
	c := dialUnix(t, f.sock)
	c.Write([]byte{socksVersion, 1, socksNoAuth})
	if n, err := c.Read(make([]byte, 8)); err == nil {
		t.Errorf("SOCKS answered %d bytes", n)
	}
	if ev := f.front.next(t); ev.Kind != "socks" || ev.Decision != "deny" {
		t.Errorf("SOCKS event = %+v", ev)
	}
}

func TestAuthorizePlainHTTPDropsCredentials(t *testing.T) {
	checkNoLeak(t)
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Proxy-Authorization")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	f := startAuthFront(t, port, port, Limits{})
	c := dialUnix(t, f.sock)
	fmt.Fprintf(c, "GET http://127.0.0.1:%d/x HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nProxy-Authorization: %s\r\n\r\n",
		port, port, basic("b", "pb"))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("reply %s %q", resp.Status, body)
	}
	if h := <-got; h != "" {
		t.Errorf("upstream saw Proxy-Authorization %q", h)
	}
	if ev := f.evB.next(t); ev.Kind != "http" || ev.Decision != "allow" || ev.SandboxID != "B" {
		t.Errorf("B's event = %+v", ev)
	}
}

func TestAuthorizeClientLimitsAndClose(t *testing.T) {
	checkNoLeak(t)
	portA := startEcho(t, "127.0.0.1:0")
	f := startAuthFront(t, portA, portA, Limits{MaxConns: 1, MaxBytesPerConn: 8})
	target := fmt.Sprintf("127.0.0.1:%d", portA)
	c1, resp := connectAuth(t, f.sock, target, basic("a", "pa"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first: %s", resp.Status)
	}
	// A's MaxConns counts the connections the front handed it.
	_, resp = connectAuth(t, f.sock, target, basic("a", "pa"))
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "connection limit (1)") {
		t.Errorf("second: %s %q", resp.Status, body)
	}
	if ev := f.front.next(t); ev.Decision != "deny" || !strings.Contains(ev.Reason, "connection limit") {
		t.Errorf("limit event = %+v", ev)
	}
	// A's byte limit applies: 8 bytes up and down in all (overshot by
	// at most one concurrent transfer, the echo's read granted before
	// the write counted).
	c1.Write([]byte("123456789"))
	c1.SetReadDeadline(time.Now().Add(waitFor))
	n, _ := io.Copy(io.Discard, c1)
	if ev := f.evA.next(t); ev.Reason != ErrByteLimit.Error() || ev.BytesUp != 8 || ev.BytesDown > 8 || n > 8 {
		t.Errorf("byte-limited event = %+v (read %d)", ev, n)
	}
	// Closing A ends A's adopted connections; the front goes on.
	c2, resp := connectAuth(t, f.sock, target, basic("a", "pa"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("third: %s", resp.Status)
	}
	if err := f.a.Close(); err != nil {
		t.Fatal(err)
	}
	c2.SetReadDeadline(time.Now().Add(waitFor))
	if _, err := c2.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("read after A closed: %v", err)
	}
	if ev := f.evA.next(t); ev.Reason != "proxy closed" {
		t.Errorf("closed event = %+v", ev)
	}
	_, resp = connectAuth(t, f.sock, target, basic("a", "pa"))
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("after A closed: %s", resp.Status)
	}
}
