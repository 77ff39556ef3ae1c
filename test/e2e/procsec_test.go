package e2e

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"mcpbox/internal/landlock"
)

// TestHostKeysInvisible holds a kernel key as the unprivileged user that
// then runs mcpbox, and lists /proc/keys from its sandbox: /proc/keys
// shows every key the reader's uid may view whose owner its user
// namespace maps, and an unprivileged sandbox maps the invoking user.
// (Root's sandboxes map an unused uid, which holds no keys.)
func TestHostKeysInvisible(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if m.root() {
			t.Skip("a root sandbox maps an unused host uid, which holds no keys")
		}
		desc := strings.ToLower(randomMarker(t))
		bin := filepath.Join(goBuild(t, "mcpbox/test/e2e/testdata/keyholder"), "keyholder")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		holder := exec.CommandContext(ctx, bin, desc)
		holder.SysProcAttr = &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: uint32(m.uid), Gid: uint32(m.uid), Groups: []uint32{}},
		}
		holder.WaitDelay = 5 * time.Second
		release, err := holder.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := holder.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			release.Close()
			if err := holder.Wait(); err != nil {
				t.Errorf("key holder: %v", err)
			}
		}()
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			t.Fatalf("key holder did not start: %v", err)
		}
		if line != "holding true\n" {
			t.Fatalf("key holder: %q; the host does not list the key, the test cannot tell", line)
		}
		r := m.sh(t, `cat /proc/keys /proc/key-users; echo done`)
		want(t, r, 0, "done")
		if strings.Contains(r.stdout, desc) {
			t.Fatalf("the host user's key is listed in the sandbox:\n%s", r)
		}
		if strings.TrimSpace(r.stdout) != "done" {
			t.Fatalf("/proc/keys or /proc/key-users not empty in the sandbox:\n%s", r)
		}
	})
}

// TestInputWithSocketRefused plants a listening unix socket, as an agent
// leaves one in $HOME, at the top of the input directory. A read-only
// mount does not stop connect(2), and Landlock restricts it only from ABI
// 9: below that mcpbox must refuse the mount and name the socket.
func TestInputWithSocketRefused(t *testing.T) {
	if landlock.ABI() >= 9 {
		t.Skip("landlock ABI 9 restricts the connect itself: internal/sandbox tests it")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		sock := filepath.Join(dir, "agent.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := os.Chmod(sock, 0o777); err != nil {
			t.Fatal(err)
		}
		script := `python3 -I -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/workspace/input/agent.sock"); print("connected")'`
		r := m.sh(t, script, "--input", dir)
		if r.code != 125 || strings.Contains(r.stdout, "connected") || !strings.Contains(r.stderr, sock) {
			t.Fatalf("want exit 125 and an error naming %s\n%s", sock, r)
		}
	})
}
