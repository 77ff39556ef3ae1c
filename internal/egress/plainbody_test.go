package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// rawUpstream answers every request on a loopback port with head and then
// body, and closes; it returns the port.
func rawUpstream(t *testing.T, head string, body []byte) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(waitFor))
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			io.WriteString(c, head)
			c.Write(body)
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPlainHTTPBodies: a plain-HTTP response body reaches the client
// byte for byte however it is framed (length, end of connection,
// chunked), a short one is cut as short, and the byte limit holds inside
// the body; the event counts every byte read from the target.
func TestPlainHTTPBodies(t *testing.T) {
	checkNoLeak(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16) // 3 MiB: many chunks
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	tests := []struct {
		name      string
		head      string
		sent      []byte // after the head
		limits    Limits
		want      []byte // the body the client reads
		wantErr   bool   // the client's read fails (the body is cut)
		reason    string // the event's
		exactDown bool   // BytesDown is head plus sent
	}{
		{name: "content-length", head: fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body)), sent: body, want: body, exactDown: true},
		{name: "to the end", head: "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", sent: body, want: body, exactDown: true},
		{name: "chunked", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", sent: []byte(chunked), want: body, exactDown: true},
		{name: "short", head: fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body)+10), sent: body, want: body, wantErr: true, exactDown: true},
		{name: "byte limit", head: fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body)), sent: body,
			limits: Limits{MaxBytesPerConn: 1 << 20}, wantErr: true, reason: "writing response: " + ErrByteLimit.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := rawUpstream(t, tt.head, tt.sent)
			ev := newEvents()
			_, sock := startProxy(t, Options{Rules: []Rule{{Host: "127.0.0.1", Ports: []int{port}}}, Limits: tt.limits, Log: ev.log})
			c := dialUnix(t, sock)
			fmt.Fprintf(c, "GET http://127.0.0.1:%d/blob HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port, port)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if tt.wantErr != (err != nil) {
				t.Fatalf("reading the body: %v (%d bytes), want an error: %v", err, len(got), tt.wantErr)
			}
			if tt.want != nil && !bytes.Equal(got, tt.want) {
				t.Fatalf("body: %d bytes, want %d, same bytes: %v", len(got), len(tt.want), bytes.HasPrefix(tt.want, got))
			}
			if !bytes.HasPrefix(body, got) {
				t.Fatal("the client read bytes the target did not send")
			}
			e := ev.next(t)
			if tt.reason != "" && e.Reason != tt.reason {
				t.Errorf("event reason = %q, want %q", e.Reason, tt.reason)
			}
			if tt.exactDown && e.BytesDown != int64(len(tt.head)+len(tt.sent)) {
				t.Errorf("BytesDown = %d, want %d", e.BytesDown, len(tt.head)+len(tt.sent))
			}
			if lim := tt.limits.MaxBytesPerConn; lim > 0 && (e.BytesUp+e.BytesDown > lim || int64(len(got)) > lim) {
				t.Errorf("moved %d up + %d down, client got %d: over the %d limit", e.BytesUp, e.BytesDown, len(got), lim)
			}
		})
	}
}
