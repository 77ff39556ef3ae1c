package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const waitFor = 10 * time.Second // bound on every wait in these tests

var netip127 = netip.MustParsePrefix("127.0.0.0/8")

// fakeResolver answers from a table; answers may change between calls
// (DNS rebinding) through next.
type fakeResolver struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr // guarded by mu
	calls atomic.Int64
}

func newResolver(hosts map[string][]string) *fakeResolver {
	r := &fakeResolver{hosts: map[string][]netip.Addr{}}
	for h, addrs := range hosts {
		r.set(h, addrs...)
	}
	return r
}

func (r *fakeResolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[host] = nil
	for _, a := range addrs {
		r.hosts[host] = append(r.hosts[host], netip.MustParseAddr(a))
	}
}

func (r *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

// events collects Log events.
type events struct{ ch chan Event }

func newEvents() *events { return &events{ch: make(chan Event, 4096)} }

func (e *events) log(ev Event) { e.ch <- ev }

func (e *events) next(t *testing.T) Event {
	t.Helper()
	select {
	case ev := <-e.ch:
		return ev
	case <-time.After(waitFor):
		t.Fatal("no egress event within timeout")
		return Event{}
	}
}

// startProxy serves opts on a unix socket in a temp dir and returns its
// path; cleanup closes the proxy and checks Serve returned.
func startProxy(t testing.TB, opts Options) (*Proxy, string) {
	t.Helper()
	if opts.HandoverPID == 0 {
		opts.HandoverPID = os.Getpid() // the tests play the init
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "egress.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(waitFor):
			t.Error("Serve did not return after Close")
		}
	})
	return p, sock
}

// startEcho runs a TCP echo server on addr (loopback) and returns its port.
func startEcho(t testing.TB, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().(*net.TCPAddr).Port
}

func dialUnix(t testing.TB, sock string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("unix", sock, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(waitFor))
	t.Cleanup(func() { c.Close() })
	return c
}

// connect sends CONNECT target and returns the connection, the reply
// status code and, for errors, the body.
func connect(t testing.TB, sock, target string) (net.Conn, int, string) {
	t.Helper()
	c, code, body, err := connectErr(sock, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, code, body
}

// connectErr is connect for goroutines other than the test's.
func connectErr(sock, target string) (net.Conn, int, string, error) {
	c, err := net.DialTimeout("unix", sock, waitFor)
	if err != nil {
		return nil, 0, "", err
	}
	c.SetDeadline(time.Now().Add(3 * waitFor))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, 0, "", fmt.Errorf("reading CONNECT reply for %s: %w", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return c, resp.StatusCode, string(body), nil
	}
	if br.Buffered() != 0 {
		c.Close()
		return nil, 0, "", errors.New("bytes after CONNECT reply")
	}
	return c, resp.StatusCode, "", nil
}

// echoOnce writes msg and expects it back.
func echoOnce(t testing.TB, c net.Conn, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading echo: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
}

// checkNoLeak fails if goroutines stay above the count before the test.
func checkNoLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(waitFor)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func isEOFOrReset(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || err != nil && (strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "broken pipe"))
}
