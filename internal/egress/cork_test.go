package egress

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// countConn counts the writes that reach it and fails them once told to.
type countConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
	buf    bytes.Buffer
	fail   error
}

func (c *countConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return 0, c.fail
	}
	c.writes++
	return c.buf.Write(b)
}

func (c *countConn) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.writes }

// TestClientConnCork: corked, full TLS records gather into few writes in
// order; a flush sends what is held; uncorked writes pass at once; a
// failed flush fails every later write.
func TestClientConnCork(t *testing.T) {
	cc := &countConn{}
	c := &clientConn{Conn: cc, s: &session{start: time.Now()}}
	rec := make([]byte, 16<<10+22)
	var want bytes.Buffer
	c.cork()
	for i := range 40 {
		rec[0] = byte(i)
		want.Write(rec)
		if n, err := c.Write(rec); n != len(rec) || err != nil {
			t.Fatalf("write %d: %d %v", i, n, err)
		}
	}
	if n := cc.count(); n < 1 || n > 3 {
		t.Errorf("40 records corked took %d writes, want 1 to 3 (a buffer of 16 records)", n)
	}
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cc.buf.Bytes(), want.Bytes()) {
		t.Fatal("corked bytes arrived changed or out of order")
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	before := cc.count()
	c.Write([]byte("x"))
	if cc.count() != before+1 {
		t.Error("an uncorked write was held back")
	}
	c.cork()
	c.Write([]byte("held"))
	broken := errors.New("broken pipe")
	cc.mu.Lock()
	cc.fail = broken
	cc.mu.Unlock()
	if err := c.flush(); !errors.Is(err, broken) {
		t.Errorf("flush on a broken conn: %v", err)
	}
	if _, err := c.Write([]byte("more")); !errors.Is(err, broken) {
		t.Errorf("write after a failed flush: %v, want the flush's error", err)
	}
	if err := c.uncork(); !errors.Is(err, broken) {
		t.Errorf("uncork after a failed flush: %v", err)
	}
}

// TestInterceptBodyStreamsAndArrivesWhole: an intercepted response (HTTP/1.1,
// where the relay corks the client connection, and HTTP/2) arrives byte
// for byte after a large head, and each later piece the server flushes
// reaches the client before the server writes the next: nothing is held
// back in the cork.
func TestInterceptBodyStreamsAndArrivesWhole(t *testing.T) {
	checkNoLeak(t)
	bulk := make([]byte, 3<<20+12345)
	rand.Read(bulk)
	sum := sha256.Sum256(bulk)
	const events = 4
	seen := make(chan struct{})
	srv, port := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(bulk)
		for i := range events {
			fmt.Fprintf(w, "\nevent %d\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-seen:
			case <-time.After(waitFor):
				return // the client never saw it: the test fails below
			case <-r.Context().Done():
				return
			}
		}
	})
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	_, sock := startProxy(t, Options{
		Rules:    []Rule{{Host: "127.0.0.1", Ports: []int{port}}},
		Injector: fakeInjector{port: port}, CA: ca, RootCAs: roots,
	})
	caPool := x509.NewCertPool()
	caPool.AddCert(ca.Certificate())
	for _, h2 := range []bool{false, true} {
		c := tlsProxyClient(t, sock, caPool, h2)
		resp, err := c.Get("https://127.0.0.1:" + strconv.Itoa(port) + "/")
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("X-Filtered") != "yes" || (resp.ProtoMajor == 2) != h2 {
			t.Fatalf("h2=%v: not intercepted as asked: proto %d, %v", h2, resp.ProtoMajor, resp.Header)
		}
		br := bufio.NewReader(resp.Body)
		head := make([]byte, len(bulk))
		if _, err := io.ReadFull(br, head); err != nil || sha256.Sum256(head) != sum {
			t.Fatalf("h2=%v: bulk arrived changed (%v)", h2, err)
		}
		for i := range events {
			got := make(chan string, 1)
			go func() {
				br.ReadString('\n') // the break before the event
				line, _ := br.ReadString('\n')
				got <- line
			}()
			select {
			case line := <-got:
				if want := fmt.Sprintf("event %d\n", i); line != want {
					t.Fatalf("h2=%v: got %q, want %q", h2, line, want)
				}
			case <-time.After(3 * time.Second):
				t.Fatalf("h2=%v: event %d held back", h2, i)
			}
			seen <- struct{}{}
		}
		if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
			t.Errorf("h2=%v: after the events: %q, %v", h2, rest, err)
		}
		resp.Body.Close()
		c.Transport.(*http.Transport).CloseIdleConnections()
	}
}
