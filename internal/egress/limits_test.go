package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMaxConns(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	ev := newEvents()
	p, sock := startProxy(t, Options{
		Rules:  []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Limits: Limits{MaxConns: 2},
		Log:    ev.log,
	})
	target := fmt.Sprintf("127.0.0.1:%d", port)
	for range 2 {
		c, code, _ := connect(t, sock, target)
		if code != http.StatusOK {
			t.Fatalf("CONNECT = %d", code)
		}
		echoOnce(t, c, "hold")
	}
	c := dialUnix(t, sock)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", target)
	if b, err := io.ReadAll(c); len(b) != 0 || err != nil && !isEOFOrReset(err) {
		t.Errorf("third connection got %q, %v; want closed", b, err)
	}
	if e := ev.next(t); !strings.Contains(e.Reason, "connection limit") {
		t.Errorf("event = %+v, want connection limit", e)
	}
	if n := p.ActiveConns(); n != 2 {
		t.Errorf("ActiveConns = %d, want 2", n)
	}
}

// TestByteLimits: an echo connection races its two directions for the
// last bytes of the budget, with every chunk of one direction echoed back
// into the other at once. The limits are exact: over splice (each
// reservation lives for one non-blocking call) the connections end with
// exactly the limit spent; over copies a write's reservation can still be
// pending when the other direction ends the connection, so up to one copy
// buffer (32 KiB) may stay unspent, never a byte more than the limit.
func TestByteLimits(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	tests := []struct {
		name    string
		limits  Limits
		conns   int
		perConn int64 // MaxBytesPerConn, or 0
		limit   int64 // bytes up+down that may pass over all conns
		// refuseAfter: connections after this many are refused up front
		// (the budget is gone); 0: none are.
		refuseAfter int
	}{
		{name: "per connection", limits: Limits{MaxBytesPerConn: 100 << 10}, conns: 2, perConn: 100 << 10, limit: 2 * 100 << 10},
		{name: "total", limits: Limits{MaxBytesTotal: 150 << 10}, conns: 2, limit: 150 << 10, refuseAfter: 1},
		{name: "both", limits: Limits{MaxBytesPerConn: 40<<10 + 1, MaxBytesTotal: 100 << 10}, conns: 3, perConn: 40<<10 + 1, limit: 100 << 10},
	}
	for _, splice := range []bool{true, false} {
		for _, tt := range tests {
			name := tt.name + "/copy"
			if splice {
				name = tt.name + "/splice"
			}
			t.Run(name, func(t *testing.T) {
				spliceRelays = splice
				defer func() { spliceRelays = true }()
				// Over copies the end may leave one buffer unspent.
				slack := int64(32 << 10)
				if splice && runtime.GOOS == "linux" {
					slack = 0
				}
				ev := newEvents()
				p, sock := startProxy(t, Options{Rules: []Rule{{Host: "127.0.0.1", Ports: []int{port}}}, Limits: tt.limits, Log: ev.log})
				var sum int64
				for i := range tt.conns {
					c, code, _ := connect(t, sock, target)
					if tt.refuseAfter > 0 && i >= tt.refuseAfter {
						if code != http.StatusForbidden {
							t.Fatalf("CONNECT after the budget = %d, want 403", code)
						}
						c.Close()
						if e := ev.next(t); e.Decision != "deny" || !strings.Contains(e.Reason, "budget") {
							t.Errorf("event = %+v, want a budget denial", e)
						}
						continue
					}
					if code != http.StatusOK {
						t.Fatalf("CONNECT = %d", code)
					}
					var wg sync.WaitGroup
					wg.Add(1)
					go func() { // the writer may block once the proxy stops reading
						defer wg.Done()
						chunk := make([]byte, 4096)
						for i := 0; i < 256; i++ {
							if _, err := c.Write(chunk); err != nil {
								return
							}
						}
					}()
					n, err := io.Copy(io.Discard, c)
					c.Close()
					wg.Wait()
					if err != nil && !isEOFOrReset(err) {
						t.Fatalf("reading: %v", err)
					}
					e := ev.next(t)
					if e.Reason != ErrByteLimit.Error() {
						t.Errorf("event = %+v, want byte limit", e)
					}
					// BytesDown counts bytes read from the target within the
					// limits; the limit may cut the connection before the last
					// of them reach the client (at most a pipe or a buffer).
					if e.BytesDown < n || e.BytesDown > n+256<<10 {
						t.Errorf("BytesDown = %d, client read %d", e.BytesDown, n)
					}
					// Each connection spends what is left of the budget, or
					// its own limit.
					want := tt.limit - sum
					if tt.perConn > 0 {
						want = min(want, tt.perConn)
					}
					got := e.BytesUp + e.BytesDown
					if got > want || got < want-slack {
						t.Errorf("connection %d moved %d bytes (up %d, down %d), want %d (less at most %d)",
							i, got, e.BytesUp, e.BytesDown, want, slack)
					}
					sum += got
				}
				if sum > tt.limit || sum < tt.limit-slack {
					t.Errorf("bytes moved = %d, want %d (less at most %d)", sum, tt.limit, slack)
				}
				if tt.limits.MaxBytesTotal > 0 && p.total.Load() != sum {
					t.Errorf("proxy total = %d, events sum to %d", p.total.Load(), sum)
				}
			})
		}
	}
}

func TestTimeouts(t *testing.T) {
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	tests := []struct {
		name    string
		limits  Limits
		trickle bool // keep bytes flowing
		want    error
	}{
		{name: "idle", limits: Limits{IdleTimeout: 200 * time.Millisecond}, want: ErrIdle},
		// The idle timeout far above the trickle's 50 ms gaps: a loaded
		// host stalled one past 200 ms, and idle ended it first.
		{name: "max duration", limits: Limits{IdleTimeout: time.Second, MaxDuration: 1500 * time.Millisecond}, trickle: true, want: ErrMaxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := newEvents()
			_, sock := startProxy(t, Options{Rules: []Rule{{Host: "127.0.0.1", Ports: []int{port}}}, Limits: tt.limits, Log: ev.log})
			start := time.Now() // before the proxy accepts, where MaxDuration starts
			c, code, _ := connect(t, sock, target)
			if code != http.StatusOK {
				t.Fatalf("CONNECT = %d", code)
			}
			var err error
			for err == nil {
				if tt.trickle {
					_, err = io.WriteString(c, "x")
					time.Sleep(50 * time.Millisecond)
				}
				if err == nil {
					_, err = c.Read(make([]byte, 1))
				}
			}
			if !isEOFOrReset(err) {
				t.Fatalf("connection ended with %v, want EOF", err)
			}
			if e := ev.next(t); e.Reason != tt.want.Error() {
				t.Errorf("event reason = %q, want %q", e.Reason, tt.want)
			}
			if d := time.Since(start); d > waitFor {
				t.Errorf("ended after %v", d)
			}
			if tt.trickle && time.Since(start) < tt.limits.MaxDuration {
				t.Errorf("trickling connection ended after %v, before its max duration", time.Since(start))
			}
		})
	}
}

// TestOneDirectionActiveIsNotIdle: a slow download with a silent upload
// direction must not hit the idle timeout, though the proxy's read from
// the client times out again and again.
func TestOneDirectionActiveIsNotIdle(t *testing.T) {
	checkNoLeak(t)
	// A tick every 100 ms for 2.4 s under a 600 ms idle timeout: the
	// client's side times out again and again, and only a stall of
	// 500 ms in the ticks (a loaded host's, not the proxy's) ends it.
	const ticks, every, idle = 24, 100 * time.Millisecond, 600 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for range ticks {
			time.Sleep(every)
			if _, err := c.Write([]byte("t")); err != nil {
				return
			}
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules:  []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Limits: Limits{IdleTimeout: idle},
		Log:    ev.log,
	})
	c, _, _ := connect(t, sock, fmt.Sprintf("127.0.0.1:%d", port))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != strings.Repeat("t", ticks) {
		t.Errorf("download = %q, %v; want %d ticks", got, err, ticks)
	}
	c.Close()
	<-served
	if e := ev.next(t); e.Reason != "" || e.BytesDown != ticks {
		t.Errorf("event = %+v, want a clean end with %d bytes down", e, ticks)
	}
}

func TestThousandConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	checkNoLeak(t)
	port := startEcho(t, "127.0.0.1:0")
	ev := &countingLog{}
	p, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "echo.test", Ports: []int{port}, CIDR: netip127}},
		Resolver: newResolver(map[string][]string{"echo.test": {"127.0.0.1"}}),
		Log:      ev.log,
	})
	const n = 1000
	target := fmt.Sprintf("echo.test:%d", port)
	errs := make(chan error, n)
	ready := make(chan struct{}, n)
	release := make(chan struct{})
	for i := range n {
		go func() {
			errs <- func() error {
				c, code, body, err := connectErr(sock, target)
				if err != nil {
					return err
				}
				defer c.Close()
				if code != http.StatusOK {
					return fmt.Errorf("CONNECT %d: %d %s", i, code, body)
				}
				msg := fmt.Sprintf("message %d", i)
				if _, err := io.WriteString(c, msg); err != nil {
					return err
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
					return fmt.Errorf("echo %d = %q, %v", i, got, err)
				}
				ready <- struct{}{}
				<-release // hold all connections open at once
				return nil
			}()
		}()
	}
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case <-ready:
		case err := <-errs:
			close(release)
			t.Fatal(err)
		case <-timeout:
			close(release)
			t.Fatal("connections not established in time")
		}
	}
	if a := p.ActiveConns(); a != n {
		t.Errorf("ActiveConns = %d, want %d", a, n)
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	deadline := time.Now().Add(waitFor)
	for p.ActiveConns() != 0 || ev.count() != n {
		if time.Now().After(deadline) {
			t.Fatalf("after close: ActiveConns = %d, events = %d", p.ActiveConns(), ev.count())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ev.e != nil {
		t.Errorf("a connection was not allowed: %v", ev.e)
	}
}

type countingLog struct {
	mu sync.Mutex
	n  int // guarded by mu
	e  error
}

func (c *countingLog) log(e Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if e.Decision != "allow" && c.e == nil {
		c.e = errors.New(e.Reason)
	}
}

func (c *countingLog) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestLongBulkTransferIsNotIdle: a download that streams without a pause
// for many idle timeouts, read slowly enough that the upstream always has
// bytes ready, ends cleanly with every byte. The spliced relay once kept
// the read deadline its wait for the first bytes set, and the splice
// loop's next read after it failed with the deadline's error: the
// connection ended mid-transfer, with no reason.
func TestLongBulkTransferIsNotIdle(t *testing.T) {
	checkNoLeak(t)
	const size, idle = 12 << 20, 500 * time.Millisecond
	payload := bytes.Repeat([]byte("d"), size)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// Only once asked: bytes sent before the CONNECT reply is read
		// would arrive with it.
		if _, err := c.Read(make([]byte, 1)); err != nil {
			return
		}
		c.Write(payload)
	}()
	port := l.Addr().(*net.TCPAddr).Port
	ev := newEvents()
	_, sock := startProxy(t, Options{
		Rules:  []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Limits: Limits{IdleTimeout: idle},
		Log:    ev.log,
	})
	c, _, _ := connect(t, sock, fmt.Sprintf("127.0.0.1:%d", port))
	start := time.Now()
	if _, err := io.WriteString(c, "g"); err != nil {
		t.Fatal(err)
	}
	var got int
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		got += n
		if err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond) // at most ~6 MiB/s: about 2 s in all
	}
	took := time.Since(start)
	c.Close() // else its silent upload direction ends idle
	<-served
	e := ev.next(t)
	if got != size || e.Reason != "" || e.BytesDown != size {
		t.Errorf("after %v (idle timeout %v): %d of %d bytes, event %+v; want them all and a clean end", took, idle, got, size, e)
	}
	if took < 3*idle {
		t.Logf("the transfer took %v, under 3 idle timeouts: it did not test much", took)
	}
}
