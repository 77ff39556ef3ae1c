package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"mcpbox/internal/landlock"
)

// listenUnix listens on addr (a path, or "@name" for an abstract socket)
// and counts the connections it accepts until the test ends.
func listenUnix(t *testing.T, addr string) *atomic.Int32 {
	t.Helper()
	l, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return &n
}

// connectScript connects to the unix socket at addr ("\0..." for an
// abstract one, as Python spells it) and prints "connected" or the errno.
func connectScript(addr string) []string {
	return []string{"/usr/bin/python3", "-I", "-c", `import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1].replace("@", "\0", 1))
    print("connected")
except OSError as e:
    print("refused", errno.errorcode.get(e.errno, e.errno))`, addr}
}

func requirePython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3 to connect from the sandbox")
	}
}

// TestMountWithSocketRefused plants a listening socket (an agent socket in
// $HOME, say) at the top of an input directory, and one a level below. Landlock below ABI 9
// cannot stop a connect to it, so the mount must be refused with an error
// naming the socket; from ABI 9 on the mount is allowed and the connect
// must fail.
func TestMountWithSocketRefused(t *testing.T) {
	requireSandbox(t)
	requirePython(t)
	dir, home := t.TempDir(), t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	accepted := listenUnix(t, sock)
	// One level down, as gpg-agent keeps its socket in $HOME.
	if err := os.Mkdir(filepath.Join(home, ".gnupg"), 0o700); err != nil {
		t.Fatal(err)
	}
	gpg := filepath.Join(home, ".gnupg", "S.gpg-agent")
	acceptedGPG := listenUnix(t, gpg)
	cases := []struct {
		name   string
		spec   Spec
		sock   string // the socket on the host
		target string // the socket inside the sandbox
	}{
		{"input", Spec{Input: dir}, sock, InputDir + "/agent.sock"},
		{"mount", Spec{Mounts: []Mount{{Source: dir, Target: "/data"}}}, sock, "/data/agent.sock"},
		{"socket itself", Spec{Mounts: []Mount{{Source: sock, Target: "/data.sock"}}}, sock, "/data.sock"},
		{"one level down", Spec{Input: home}, gpg, InputDir + "/.gnupg/S.gpg-agent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := quick(connectScript(c.target)...)
			spec.Input, spec.Mounts = c.spec.Input, c.spec.Mounts
			var out bytes.Buffer
			res, err := Run(context.Background(), spec, Stdio{Stdout: &out})
			if landlock.ABI() < resolveUnixABI {
				var se *StartError
				if !errors.As(err, &se) || !errors.Is(err, ErrMountSocket) || !strings.Contains(err.Error(), c.sock) {
					t.Fatalf("Run: %v (output %q), want a StartError naming %s", err, out.String(), c.sock)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != 0 || !strings.HasPrefix(out.String(), "refused") {
				t.Fatalf("exit %d, output %q: want the connect refused by landlock", res.ExitCode, out.String())
			}
		})
	}
	if n := accepted.Load() + acceptedGPG.Load(); n != 0 {
		t.Fatalf("the host sockets accepted %d connections from sandboxes", n)
	}
	// Without the socket the same directory mounts.
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	spec := quick("true")
	spec.Input = dir
	if res, err := Run(context.Background(), spec, Stdio{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("Run without the socket: %v, %+v", err, res)
	}
}

// TestAbstractSocketUnreachable listens on an abstract unix socket on the
// host and connects to it from a sandbox: the network namespace and, on
// Landlock ABI 6 and later, the abstract-socket scope keep it out of reach.
func TestAbstractSocketUnreachable(t *testing.T) {
	requireSandbox(t)
	requirePython(t)
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := "@mcpbox-test-" + hex.EncodeToString(b)
	accepted := listenUnix(t, name)
	// The host reaches it: the listener works.
	c, err := net.Dial("unix", name)
	if err != nil {
		t.Fatalf("connecting on the host: %v", err)
	}
	c.Close()
	var out bytes.Buffer
	res, err := Run(context.Background(), quick(connectScript(name)...), Stdio{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.HasPrefix(out.String(), "refused") {
		t.Fatalf("exit %d, output %q: want the connect refused", res.ExitCode, out.String())
	}
	// Only the host's own connection; give the accept loop no chance to
	// miss one by closing the listener first.
	if n := accepted.Load(); n > 1 {
		t.Fatalf("the abstract socket accepted %d connections, want only the host's", n)
	}
}

func TestSocketCheck(t *testing.T) {
	for _, tt := range []struct {
		abi  int
		ok   bool
		says string
	}{
		{abi: 6, ok: false, says: "ABI 6 < 9"},
		{abi: 8, ok: false, says: "not restricted"},
		{abi: 9, ok: true, says: "ABI 9 restricts"},
		{abi: 12, ok: true, says: "restricts"},
	} {
		c := socketCheck(tt.abi)
		if c.OK != tt.ok || !strings.Contains(c.Detail, tt.says) || c.Required {
			t.Errorf("socketCheck(%d) = %+v, want OK %v, not required, detail containing %q", tt.abi, c, tt.ok, tt.says)
		}
	}
}
