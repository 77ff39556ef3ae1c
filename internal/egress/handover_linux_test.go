package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair returns the two ends of a loopback TCP connection: the one a
// workload dialed and the one the init accepted.
func tcpPair(t testing.TB) (dialed, accepted *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d, err := net.DialTimeout("tcp", l.Addr().String(), waitFor)
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Accept()
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); a.Close() })
	d.SetDeadline(time.Now().Add(waitFor))
	return d.(*net.TCPConn), a.(*net.TCPConn)
}

// handOver does the init's part: it passes the accepted end of a fresh
// TCP connection to the proxy and closes its copies, and returns the
// workload's end.
func handOver(t testing.TB, sock, target string) net.Conn {
	t.Helper()
	d, a := tcpPair(t)
	p := dialUnix(t, sock)
	if err := SendConn(p.(*net.UnixConn), a, target); err != nil {
		t.Fatal(err)
	}
	a.Close()
	p.Close()
	return d
}

func TestHandOverProxyPort(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	ev := newEvents()
	_, sock := startProxy(t, Options{
		SandboxID: "sb1",
		Rules:     []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Log:       ev.log,
	})
	c := handOver(t, sock, "")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT over a handed-over connection = %v, %v", resp, err)
	}
	echoOnce(t, c, "hello through the proxy")
	c.Close()
	e := ev.next(t)
	if e.Kind != "connect" || e.Decision != "allow" || e.BytesUp != 23 || e.BytesDown != 23 {
		t.Errorf("event = %+v, want the allowed CONNECT with its bytes", e)
	}

	// A denied target: the same 403 and deny line as on the socket.
	c = handOver(t, sock, "")
	fmt.Fprintf(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("denied CONNECT over a handed-over connection = %v, %v", resp, err)
	}
	if e := ev.next(t); e.Decision != "deny" || e.Kind != "connect" {
		t.Errorf("event = %+v, want a denied CONNECT", e)
	}
}

func TestHandOverForward(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	other := startEcho(t, "127.0.0.1:0")
	res := newResolver(map[string][]string{"db.internal": {"127.0.0.1"}})
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Forwards: []Forward{{Listen: "127.0.0.1:5432", To: fmt.Sprintf("db.internal:%d", port)}},
		Resolver: res,
		Log:      ev.log,
	})
	c := handOver(t, sock, fmt.Sprintf("db.internal:%d", port))
	echoOnce(t, c, "select 1") // no CONNECT reply first
	c.Close()
	if e := ev.next(t); e.Kind != "forward" || e.Decision != "allow" || !strings.HasPrefix(e.Rule, "forward ") || e.BytesDown != 8 {
		t.Errorf("event = %+v, want an allowed forward", e)
	}
	// Another target is the policy's to refuse: the connection just
	// closes, with no reply text in the workload's protocol.
	c = handOver(t, sock, fmt.Sprintf("db.internal:%d", other))
	if b, err := io.ReadAll(c); err != nil && !isEOFOrReset(err) || len(b) != 0 {
		t.Errorf("refused forward: read %q, %v; want a bare close", b, err)
	}
	if e := ev.next(t); e.Decision != "deny" {
		t.Errorf("event = %+v, want a deny", e)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// openFDsButPipePairs counts this process's open descriptors but those of
// pipes whose two ends are both open here: the splice pipes that pools
// keep (ours, and Go's own for io.Copy between sockets, which it closes
// only at some garbage collection). A descriptor received from a peer
// and kept is counted: the flood sends single pipe ends.
func openFDsButPipePairs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	pipes := map[string]int{}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed since ReadDir (the directory's own one)
		}
		n++
		if strings.HasPrefix(target, "pipe:") {
			pipes[target]++
		}
	}
	for _, k := range pipes {
		if k >= 2 {
			n -= k
		}
	}
	return n
}

// awaitFDs waits until this process has want open descriptors at most.
func awaitFDs(t testing.TB, want int) {
	t.Helper()
	awaitCount(t, openFDs, want)
}

// awaitCount waits until count says want at most.
func awaitCount(t testing.TB, count func(testing.TB) int, want int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		n := count(t)
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("open descriptors: %d, want %d: the proxy kept some", n, want)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sendRaw sends msg with fds on a new connection to sock.
func sendRaw(t testing.TB, sock string, msg []byte, fds ...int) *net.UnixConn {
	t.Helper()
	p := dialUnix(t, sock).(*net.UnixConn)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := p.WriteMsgUnix(msg, oob, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHandOverAttacks: the proxy socket is the sandbox's to write to, so
// a workload may send any descriptor or message. Each is refused with a
// deny line, the connection closed, every descriptor it carried closed
// (its peer or the pipe sees the end) and none kept.
func TestHandOverAttacks(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules:  []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Limits: Limits{HeaderTimeout: 500 * time.Millisecond},
		Log:    ev.log,
	})
	msg := []byte(handoverMagic + "\n")

	// Each case returns the descriptors to send and a probe of ours that
	// sees EOF once every sent copy is closed.
	type attack struct {
		name string
		msg  []byte
		make func(t *testing.T) (send []int, probe io.Reader)
	}
	socketpair := func(t *testing.T) ([]int, io.Reader) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.SetNonblock(fds[0], true) // pollable: deadlines bound the probe
		probe := os.NewFile(uintptr(fds[0]), "probe")
		t.Cleanup(func() { probe.Close() })
		return fds[1:], probe
	}
	pipe := func(t *testing.T) ([]int, io.Reader) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		fd, err := unix.Dup(int(w.Fd()))
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		return []int{fd}, r
	}
	tcpEnd := func(t *testing.T) ([]int, io.Reader) {
		d, a := tcpPair(t)
		f, err := a.File() // a dup
		if err != nil {
			t.Fatal(err)
		}
		a.Close()
		fd, err := unix.Dup(int(f.Fd()))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return []int{fd}, d
	}
	attacks := []attack{
		{"unix socket", msg, socketpair},
		{"pipe", msg, pipe},
		{"regular file", msg, func(t *testing.T) ([]int, io.Reader) {
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, []byte("GET http://127.0.0.1/ HTTP/1.1\r\n\r\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			return []int{fd}, nil
		}},
		{"listening socket", msg, func(t *testing.T) ([]int, io.Reader) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			f, err := l.(*net.TCPListener).File()
			l.Close()
			if err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Dup(int(f.Fd()))
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			return []int{fd}, nil
		}},
		{"unconnected TCP socket", msg, func(t *testing.T) ([]int, io.Reader) {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			return []int{fd}, nil
		}},
		{"UDP socket", msg, func(t *testing.T) ([]int, io.Reader) {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
				t.Fatal(err)
			}
			return []int{fd}, nil
		}},
		{"two TCP connections", msg, func(t *testing.T) ([]int, io.Reader) {
			a, probe := tcpEnd(t)
			b, _ := tcpEnd(t)
			return append(a, b...), probe
		}},
		{"a TCP connection and a pipe", msg, func(t *testing.T) ([]int, io.Reader) {
			a, probe := tcpEnd(t)
			b, _ := pipe(t)
			return append(a, b...), probe
		}},
		{"many descriptors", msg, func(t *testing.T) ([]int, io.Reader) {
			var fds []int
			var probe io.Reader
			for range 2 * maxHandoverFDs {
				fd, p := pipe(t)
				fds = append(fds, fd...)
				probe = p // the last: beyond the room the proxy reads
			}
			return fds, probe
		}},
		{"no descriptor", msg, func(t *testing.T) ([]int, io.Reader) { return nil, nil }},
		{"no newline", []byte(handoverMagic), tcpEnd},
		{"wrong magic", []byte("\x00FD2 \n"), tcpEnd},
		{"control bytes in the target", []byte(handoverMagic + "a\x00b:1\n"), tcpEnd},
		{"oversized message", []byte(handoverMagic + strings.Repeat("a", 2*maxHandover) + "\n"), tcpEnd},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			fds, probe := a.make(t)
			// Once our copies of fds are closed, the proxy's would be all
			// that is left of them.
			before := openFDs(t) - len(fds)
			p := sendRaw(t, sock, a.msg, fds...)
			closeFDs(fds)
			if b, err := io.ReadAll(p); err != nil && !isEOFOrReset(err) || len(b) != 0 {
				t.Errorf("proxy answered %q, %v; want the connection closed", b, err)
			}
			p.Close()
			if probe != nil {
				if c, ok := probe.(net.Conn); ok {
					c.SetReadDeadline(time.Now().Add(waitFor))
				}
				if f, ok := probe.(*os.File); ok {
					f.SetReadDeadline(time.Now().Add(waitFor))
				}
				if b, err := io.ReadAll(probe); err != nil && !isEOFOrReset(err) || len(b) != 0 {
					t.Errorf("probe read %q, %v: want EOF, every copy sent closed", b, err)
				}
			}
			e := ev.next(t)
			if e.Decision != "deny" || !strings.Contains(e.Reason, "hand-over") {
				t.Errorf("event = %+v, want a denied hand-over", e)
			}
			awaitFDs(t, before)
		})
	}
}

// TestHandOverFloodAndSilentPeers: peers that send nothing (held until the
// head deadline), only the first byte of a hand-over (refused at once: a
// hand-over comes in one message), or many descriptors at once on many
// connections hold neither the accept loop nor a descriptor: a real
// hand-over meanwhile is served, and all end refused with the count back
// where it was.
func TestHandOverFloodAndSilentPeers(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules:  []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Limits: Limits{HeaderTimeout: time.Second, MaxConns: 1000},
		Log:    ev.log,
	})
	// Copies, not pooled pipes: the count below must not see the pool.
	spliceRelays = false
	defer func() { spliceRelays = true }()
	before := openFDsButPipePairs(t)
	const silent, flood = 20, 100
	var conns []net.Conn
	for i := range silent {
		p := dialUnix(t, sock)
		if i%2 == 1 {
			if _, err := p.Write([]byte{0}); err != nil {
				t.Fatal(err)
			}
		}
		conns = append(conns, p)
	}
	for range flood {
		var fds []int
		for range 4 {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Dup(int(w.Fd()))
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			w.Close()
			fds = append(fds, fd)
		}
		conns = append(conns, sendRaw(t, sock, []byte(handoverMagic+"\n"), fds...))
		closeFDs(fds)
	}
	// Meanwhile a real hand-over is served.
	c := handOver(t, sock, "")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT during the flood = %v, %v", resp, err)
	}
	echoOnce(t, c, "still served")
	c.Close()
	denied := 0
	for range silent + flood + 1 {
		if e := ev.next(t); e.Decision == "deny" {
			denied++
		}
	}
	if denied != silent+flood {
		t.Errorf("%d denied, want %d", denied, silent+flood)
	}
	for _, p := range conns {
		if _, err := p.Read(make([]byte, 1)); !isEOFOrReset(err) && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("flood connection read: %v, want closed", err)
		}
		p.Close()
	}
	awaitCount(t, openFDsButPipePairs, before)
}

// TestHandOverByteLimit: a handed-over connection spends the byte budget
// exactly as one on the socket does (TestByteLimits): the splice relay
// ends it with exactly the limit moved.
func TestHandOverByteLimit(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	ev := newEvents()
	const limit = 100 << 10
	_, sock := startProxy(t, Options{
		Rules:  []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Limits: Limits{MaxBytesPerConn: limit},
		Log:    ev.log,
	})
	c := handOver(t, sock, "")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	head := make([]byte, len("HTTP/1.1 200 Connection established\r\n\r\n"))
	if _, err := io.ReadFull(c, head); err != nil || string(head[9:12]) != "200" {
		t.Fatalf("CONNECT: %q %v", head, err)
	}
	done := make(chan struct{})
	go func() { // the writer may block once the proxy stops reading
		defer close(done)
		chunk := make([]byte, 4096)
		for range 256 {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	n, err := io.Copy(io.Discard, c)
	c.Close()
	<-done
	if err != nil && !isEOFOrReset(err) {
		t.Fatalf("reading: %v", err)
	}
	e := ev.next(t)
	if e.Reason != ErrByteLimit.Error() || e.BytesUp+e.BytesDown != limit || n > e.BytesDown {
		t.Errorf("event = %+v (client read %d), want the byte limit with exactly %d bytes moved", e, n, limit)
	}
}
