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
	"path/filepath"
	"runtime"
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
		if r.URL.Path == "/late" {
			// Looked up once the client has let go of its socket.
			time.Sleep(100 * time.Millisecond)
		}
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
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node to connect as another uid")
	}
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	var other *OtherUserError
	out := asNobody(t, port, "", false)
	if got := verdict(); !errors.As(got, &other) || other.UID != nobody {
		t.Fatalf("a request from uid %d: %v; want it refused naming the uid", nobody, got)
	}
	if !strings.Contains(out, "403") {
		t.Errorf("uid %d's request got: %s", nobody, out)
	}
	// From another of this host's addresses, not a loopback one: still
	// this host, still refused.
	if src := hostAddr(); src != "" {
		asNobody(t, port, src, false)
		if got := verdict(); !errors.As(got, &other) || other.UID != nobody {
			t.Errorf("a request from uid %d at %s: %v; want it refused naming the uid", nobody, src, got)
		}
	}
	// A client that closes as soon as it has sent: its socket is soon no
	// process's (the table shows inode 0 and uid 0, not root's).
	for range 3 {
		asNobody(t, port, "", true)
		if got := verdict(); got == nil {
			t.Fatalf("a request from uid %d whose socket was closed at once was let through", nobody)
		}
	}
}

const nobody = 65534

// asNobody sends GET / to 127.0.0.1:port as uid nobody, from src if
// set, and returns the answer; with closeAtOnce it closes the socket as
// soon as the request is written.
func asNobody(t *testing.T, port, src string, closeAtOnce bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const js = `const [port, src, close] = process.argv.slice(1);
const o = {host: "127.0.0.1", port: +port};
if (src) o.localAddress = src;
const s = require("net").connect(o, () => {
  s.write("GET /" + (close === "1" ? "late" : "") + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (close === "1") s.destroy();
});
s.on("data", d => process.stdout.write(d));
s.on("error", () => {});`
	closeArg := "0"
	if closeAtOnce {
		closeArg = "1"
	}
	cmd := exec.CommandContext(ctx, "node", "-e", js, port, src, closeArg)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node as uid %d: %v\n%s", nobody, err, out)
	}
	return string(out)
}

// hostAddr is an IPv4 address of one of this host's interfaces other
// than loopback, or "".
func hostAddr() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// TestSameUserWithoutTables: on Linux without the socket tables (no
// /proc mounted) a peer on this host cannot be told, and is refused,
// even this process itself.
func TestSameUserWithoutTables(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the check is made on Linux only")
	}
	saved := tables
	tables = []struct {
		path string
		v6   bool
	}{{filepath.Join(t.TempDir(), "tcp"), false}, {filepath.Join(t.TempDir(), "tcp6"), true}}
	t.Cleanup(func() { tables = saved })
	verdicts := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { verdicts <- SameUser(r) }))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-verdicts; !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a local peer with no socket tables: %v; want it refused (ErrUnsupported)", err)
	}
}
