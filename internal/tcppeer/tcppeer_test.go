package tcppeer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUIDOfOwnConnection: a connection this process makes, over IPv4 and
// IPv6 loopback and to a dual-stack listener, is found as this user's.
func TestUIDOfOwnConnection(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp here")
	}
	for _, c := range []struct{ network, listen, dial string }{
		{"tcp4", "127.0.0.1:0", "127.0.0.1"},
		{"tcp6", "[::1]:0", "::1"},
		{"tcp", "[::]:0", "127.0.0.1"},
	} {
		ln, err := net.Listen(c.network, c.listen)
		if err != nil {
			t.Logf("%s %s: %v (skipped)", c.network, c.listen, err)
			continue
		}
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		conn, err := net.Dial("tcp", net.JoinHostPort(c.dial, fmt.Sprint(port)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		from := netip.MustParseAddrPort(conn.LocalAddr().String())
		to := netip.MustParseAddrPort(conn.RemoteAddr().String())
		uid, err := UID(from, to)
		if err != nil || uid != uint32(os.Geteuid()) {
			t.Errorf("%s: UID(%s, %s) = %d, %v; want %d", c.listen, from, to, uid, err, os.Geteuid())
		}
		// The accepting side's own socket is not the peer.
		if _, err := UID(to, netip.AddrPortFrom(from.Addr(), from.Port()+1)); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: UID of a connection that does not exist: %v, want ErrNotFound", c.listen, err)
		}
	}
}

// TestSameUserRefusesAnotherUser: a request over loopback from a process
// of another uid (a login link read from a browser's command line) is
// refused with that uid; this process's own passes.
func TestSameUserRefusesAnotherUser(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp here")
	}
	verdicts := make(chan error, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := SameUser(r)
		verdicts <- err
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
		}
	}))
	defer srv.Close()
	verdict := func() error {
		select {
		case err := <-verdicts:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the server saw no request")
			return nil
		}
	}
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := verdict(); err != nil {
		t.Fatalf("this process's own request: %v", err)
	}

	if os.Geteuid() != 0 {
		t.Skip("not root: cannot run a process of another uid")
	}
	const nobody = 65534
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/`+port+`; printf 'GET / HTTP/1.0\r\n\r\n' >&3; cat <&3`)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.Output()
	var other *OtherUserError
	if got := verdict(); !errors.As(got, &other) || other.UID != nobody {
		t.Fatalf("a request from uid %d: %v; want it refused naming the uid", nobody, got)
	}
	if err != nil || !strings.Contains(string(out), "403") {
		t.Errorf("uid %d's request: %v\n%s", nobody, err, out)
	}
}
