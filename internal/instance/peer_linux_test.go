package instance

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// foreignListenEnv makes the test binary, re-executed by listenForeign,
// listen on the socket it names instead of running tests.
const foreignListenEnv = "MCPBOX_TEST_FOREIGN_LISTEN"

func TestMain(m *testing.M) {
	if path := os.Getenv(foreignListenEnv); path != "" {
		serveForeign(path)
		return
	}
	os.Exit(m.Run())
}

// serveForeign listens on path, says so, accepts until its input ends.
func serveForeign(path string) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("{}\n"))
			c.Close()
		}
	}()
	os.Stdout.WriteString("listening\n")
	var b [1]byte
	os.Stdin.Read(b[:])
	ln.Close()
}

// listenForeign starts this test binary in a user namespace of its own,
// as a sandbox runs in unprivileged mode: the same uid outside, mapped to
// root inside. It listens on path until the test ends.
func listenForeign(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), foreignListenEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		cancel()
		t.Skipf("cannot start a process in a user namespace of its own here: %v", err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait(); cancel() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "listening\n" {
		t.Fatalf("the foreign listener: %q, %v", line, err)
	}
}

// TestListPassesOverSandboxes: a sandbox that can write a state dir (a
// repository's config may name its output as one) cannot pose there as a
// running gateway: a record whose socket a process in another user
// namespace listens on, though of this very uid, is not live, and
// neither is one whose socket is a link to a real gateway's.
func TestListPassesOverSandboxes(t *testing.T) {
	state, real := shortDir(t), shortDir(t)
	if err := MakeDir(state); err != nil {
		t.Fatal(err)
	}
	listenForeign(t, SocketPath(state, 4242))
	if !Alive(SocketPath(state, 4242)) {
		t.Fatal("the foreign listener does not answer")
	}
	listen(t, real, 7)
	if err := os.Symlink(SocketPath(real, 7), SocketPath(state, 7)); err != nil {
		t.Fatal(err)
	}
	listen(t, state, 8) // a real one beside them
	for _, pid := range []int{4242, 7, 8} {
		if err := Write(Record{PID: pid, StateDir: state, Project: "/p", Transport: "stdio"}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := List(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].PID != 8 {
		t.Errorf("List: %+v; want only the real 8, not the sandbox's 4242 or the link 7", recs)
	}
	conn, err := Dial(SocketPath(state, 4242), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if Serves(conn, state) {
		t.Error("Serves admits a process in another user namespace")
	}
}

// shortDir is a temp dir with a short path (socket paths are short).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "mcpbox-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestTrustedUID: an admin command talks only to a gateway of its own
// user, of root, or (run by root) of the state dir's owner.
func TestTrustedUID(t *testing.T) {
	dir := t.TempDir()
	me := uint32(os.Geteuid())
	if !TrustedUID(me, dir) || !TrustedUID(0, dir) {
		t.Fatal("refused this user or root")
	}
	if TrustedUID(54321, dir) {
		t.Fatal("trusted a stranger answering on our state dir")
	}
	if me != 0 {
		t.Skip("not root: cannot give the dir to another user")
	}
	if err := os.Chown(dir, 54321, 54321); err != nil {
		t.Fatal(err)
	}
	if !TrustedUID(54321, dir) || TrustedUID(54322, dir) {
		t.Fatal("root: the dir owner's gateway must be trusted, nobody else's")
	}
}
