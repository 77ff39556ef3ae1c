package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair returns both ends of a loopback TCP connection: the workload's
// and the one the sandbox init accepts.
func tcpPair(t *testing.T) (workload, accepted *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.DialTimeout("tcp", l.Addr().String(), waitFor)
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); a.Close() })
	c.SetDeadline(time.Now().Add(waitFor))
	return c.(*net.TCPConn), a.(*net.TCPConn)
}

// TestHandOffServesConnection: a TCP connection handed over the unix
// socket is served by the proxy itself, under the same policy and log.
func TestHandOffServesConnection(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	ev := newEvents()
	_, sock := startProxy(t, Options{Rules: []Rule{{Host: "127.0.0.1", Ports: []int{port}}}, Log: ev.log})
	target := fmt.Sprintf("127.0.0.1:%d", port)

	w, a := tcpPair(t)
	if err := HandOff(sock, a, waitFor); err != nil {
		t.Fatal(err)
	}
	a.Close() // the init keeps no copy
	fmt.Fprintf(w, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(w)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT via handed-over connection: %v %v", resp, err)
	}
	msg := strings.Repeat("spliced ", 100_000)
	go io.WriteString(w, msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
		t.Fatalf("echo through handed-over connection: %v (%d bytes)", err, len(got))
	}
	w.CloseWrite()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after half-close: %v, want EOF", err)
	}
	e := ev.next(t)
	if e.Kind != "connect" || e.Decision != "allow" || e.BytesUp != int64(len(msg)) || e.BytesDown != int64(len(msg)) {
		t.Fatalf("event = %+v, want an allowed connect with %d bytes each way", e, len(msg))
	}

	// The policy still decides: another port is refused on the handed-over
	// connection as on the socket.
	w2, a2 := tcpPair(t)
	if err := HandOff(sock, a2, waitFor); err != nil {
		t.Fatal(err)
	}
	a2.Close()
	fmt.Fprintf(w2, "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(w2), &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT to an unlisted port: %v %v, want 403", resp, err)
	}
	if e := ev.next(t); e.Decision != "deny" {
		t.Fatalf("event = %+v, want deny", e)
	}
}

// TestHandOffRefusesOtherDescriptors: only a connected TCP socket is
// adopted; anything else sent over the socket (a pipe, a listening
// socket, several descriptors, descriptors with a request) is closed by
// the proxy unused, and the request goes on or is refused as without it.
func TestHandOffRefusesOtherDescriptors(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	ev := newEvents()
	_, sock := startProxy(t, Options{Rules: []Rule{{Host: "127.0.0.1", Ports: []int{port}}}, Log: ev.log})
	target := fmt.Sprintf("127.0.0.1:%d", port)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lf, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()

	for _, tc := range []struct {
		name  string
		first string // the message the fds ride on
		pipe  bool   // send a pipe's write end (and check it is closed)
		extra []int  // more descriptors
		want  int    // HTTP status on the unix connection
	}{
		{"pipe", "\x00\r\n\r\n", true, nil, http.StatusBadRequest},
		{"listening socket", "\x00\r\n\r\n", false, []int{int(lf.Fd())}, http.StatusBadRequest},
		{"two descriptors", "\x00\r\n\r\n", true, []int{int(lf.Fd())}, http.StatusBadRequest},
		{"with a request", "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n", true, nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			c := dialUnix(t, sock).(*net.UnixConn)
			fds := tc.extra
			if tc.pipe {
				fds = append([]int{int(pw.Fd())}, fds...)
			}
			if _, _, err := c.WriteMsgUnix([]byte(tc.first), unix.UnixRights(fds...), nil); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != tc.want {
				t.Fatalf("reply: %v %v, want %d", resp, err, tc.want)
			}
			if !tc.pipe {
				c.Close()
				ev.next(t)
				return
			}
			// The proxy closed its copy of the pipe: the read end sees EOF.
			pr.SetReadDeadline(time.Now().Add(waitFor))
			if n, err := pr.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("pipe read = %d, %v: the proxy kept the descriptor", n, err)
			}
			c.Close()
			ev.next(t)
		})
	}
}
