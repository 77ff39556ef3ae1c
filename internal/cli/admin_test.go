package cli

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/config"
)

// TestAdminSocket: the gateway's own user reaches the admin socket; a
// process of the same user in another user namespace (as a sandbox runs)
// is refused, and the socket is not open to others.
func TestAdminSocket(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "mcpbox-admin-") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv("XDG_STATE_HOME", dir)
	rec := newRecord(dir, "", dir, true, "")
	inst, err := startInstance(ctx, &adminServer{c: &config.Config{}}, rec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer inst.close()
	sock := rec.Socket()
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	// Its own user gets an answer (here: that no server has the secret).
	if _, err := adminCall(dir, adminRequest{Op: "rotate", Secret: "NONE"}); err == nil || !strings.Contains(err.Error(), "no server has a secret") {
		t.Fatalf("own user: %v", err)
	}
	if _, err := serveAdmin(ctx, sock, &adminServer{c: &config.Config{}}); err == nil || !strings.Contains(err.Error(), "another mcpbox serve") {
		t.Fatalf("a second listener on the instance's socket: %v", err)
	}

	unshare, err1 := exec.LookPath("unshare")
	python, err2 := exec.LookPath("python3")
	if err1 != nil || err2 != nil {
		t.Skip("unshare or python3 missing: cannot test a peer in another user namespace")
	}
	script := `import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"op":"rotate","secret":"NONE"}\n'); print(s.recv(4096).decode())`
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	out, err := exec.CommandContext(cctx, unshare, "--user", "--map-current-user", python, "-c", script, sock).CombinedOutput()
	if err != nil {
		t.Skipf("cannot run a process in a new user namespace here: %v %s", err, out)
	}
	if !strings.Contains(string(out), "permission denied") || strings.Contains(string(out), "no server") {
		t.Fatalf("a peer in another user namespace got %q, want permission denied", out)
	}
}

// TestHTTPOptionsRefuseExposedBind: a non-loopback address needs TLS and
// client tokens.
func TestHTTPOptionsRefuseExposedBind(t *testing.T) {
	t.Setenv("MCPBOX_TEST_CLIENT_TOKEN", "client-token-0123456789")
	clients := []config.Client{{Name: "a", Token: config.Token{From: "env:MCPBOX_TEST_CLIENT_TOKEN"}}}
	tests := []struct {
		name string
		c    config.Config
		addr string
		ok   bool
	}{
		{"loopback", config.Config{}, "127.0.0.1:8765", true},
		{"all interfaces without tls or tokens", config.Config{}, "0.0.0.0:8765", false},
		{"tokens without tls", config.Config{Clients: clients}, "0.0.0.0:8765", false},
		{"tls without tokens", config.Config{Listen: config.Listen{HTTP: config.HTTP{TLS: config.TLS{Cert: "c.pem", Key: "k.pem"}}}}, "0.0.0.0:8765", false},
		{"tls and tokens", config.Config{Clients: clients, Listen: config.Listen{HTTP: config.HTTP{TLS: config.TLS{Cert: "c.pem", Key: "k.pem"}}}}, "0.0.0.0:8765", true},
	}
	for _, tt := range tests {
		_, _, _, err := httpOptions(&tt.c, t.TempDir(), tt.addr)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// TestTrustedPeer: an admin command talks only to a gateway of its own
// user, of root, or (run by root) of the state dir's owner.
func TestTrustedPeer(t *testing.T) {
	dir := t.TempDir()
	me := uint32(os.Geteuid())
	if !trustedPeer(me, dir) || !trustedPeer(0, dir) {
		t.Fatal("refused this user or root")
	}
	if trustedPeer(54321, dir) {
		t.Fatal("trusted a stranger answering on our state dir")
	}
	if me != 0 {
		t.Skip("not root: cannot give the dir to another user")
	}
	if err := os.Chown(dir, 54321, 54321); err != nil {
		t.Fatal(err)
	}
	if !trustedPeer(54321, dir) || trustedPeer(54322, dir) {
		t.Fatal("root: the dir owner's gateway must be trusted, nobody else's")
	}
}
