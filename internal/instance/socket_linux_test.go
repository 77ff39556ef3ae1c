package instance

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLongSocketPath: a state dir deeper than a unix socket address holds
// still gets working instance sockets (bound and dialed through its
// directory's fd), and they are found live, then dead once closed.
func TestLongSocketPath(t *testing.T) {
	state := filepath.Join(t.TempDir(), strings.Repeat("s", 80), strings.Repeat("t", 40))
	if err := MakeDir(state); err != nil {
		t.Fatal(err)
	}
	sock := SocketPath(state, 42)
	if len(sock) <= maxSockPath {
		t.Fatalf("the path %s is short enough to bind directly: not a test", sock)
	}
	if _, err := net.Listen("unix", sock); err == nil {
		t.Fatal("the kernel took a socket path that long: not a test")
	}
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	if err := Write(Record{PID: 42, StateDir: state}); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(sock, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2)
	c.Read(b)
	c.Close()
	if string(b) != "ok" {
		t.Errorf("read %q through the long path", b)
	}
	if recs, _ := List(state); len(recs) != 1 {
		t.Errorf("List: %v, want the live instance", recs)
	}
	ln.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("closing unlinked the socket (through a stale fd?): %v", err)
	}
	if gone, _ := RemoveStale(state); len(gone) != 1 {
		t.Errorf("RemoveStale: %v, want [42]", gone)
	}
}
