package instance

import (
	"net"
	"os"
	"testing"
)

// TestPortHolder: the process listening on a port is found (here: this
// test), and a free port has no holder.
func TestPortHolder(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp here")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	pid, comm, ok := PortHolder(port)
	if !ok || pid != os.Getpid() || comm == "" {
		t.Errorf("PortHolder(%d) = %d %q %v, want this process (%d)", port, pid, comm, ok, os.Getpid())
	}
	ln.Close()
	if pid, _, ok := PortHolder(port); ok {
		t.Errorf("PortHolder(%d) of a closed listener = %d", port, pid)
	}
}
