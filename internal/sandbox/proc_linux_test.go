package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/sandbox/initproc"

	"golang.org/x/sys/unix"
)

// holdKey adds a user key with a random description to this thread's
// process keyring; the caller invalidates it.
//
// Preconditions: the calling goroutine is locked to its thread until the
// test ends: keyrings, and so possession of the key, belong to a thread's
// credentials.
func holdKey(t *testing.T) (id int, desc string) {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	desc = "mcpbox-test-key-" + hex.EncodeToString(b)
	id, err := unix.AddKey("user", desc, []byte("secret"), unix.KEY_SPEC_PROCESS_KEYRING)
	if err != nil {
		t.Skipf("adding a key: %v", err)
	}
	return id, desc
}

// giveKey makes the key owned by, and viewable by, uid: the host uid the
// sandbox user maps to. /proc/keys lists keys whose owner is mapped in the
// reader's user namespace and that the reader may view, so without the
// mask the workload would list it.
func giveKey(t *testing.T, id, uid int) {
	t.Helper()
	if uid != os.Geteuid() {
		if _, err := unix.KeyctlInt(unix.KEYCTL_CHOWN, id, uid, -1, 0); err != nil {
			t.Fatalf("giving the key to uid %d: %v", uid, err)
		}
	}
	const posAll, usrAll = 0x3f000000, 0x003f0000
	if err := unix.KeyctlSetperm(id, posAll|usrAll); err != nil {
		t.Fatalf("setting key permissions: %v", err)
	}
}

// hostSees reports whether a process of uid lists desc in /proc/keys.
func hostSees(t *testing.T, uid int, desc string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "cat", "/proc/keys")
	if uid != os.Geteuid() {
		u := strconv.Itoa(uid)
		cmd = exec.CommandContext(ctx, "setpriv", "--reuid="+u, "--regid="+u, "--clear-groups", "cat", "/proc/keys")
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reading /proc/keys on the host as uid %d: %v", uid, err)
	}
	return bytes.Contains(out, []byte(desc))
}

// TestProcHostWideFilesMasked holds a kernel key on the host and reads
// /proc/keys and the other host-wide /proc files from a sandbox: they
// must read empty, while the files runtimes need stay readable.
func TestProcHostWideFilesMasked(t *testing.T) {
	requireSandbox(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	id, desc := holdKey(t)
	defer func() {
		if _, err := unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0); err != nil {
			t.Errorf("removing the test key: %v", err)
		}
	}()
	script := `read go
for f in ` + strings.Join(initproc.ProcMasked(), " ") + `; do
	p=/proc/$f
	if [ -d $p ]; then echo "$f $(ls -A $p | wc -l)"; elif [ -e $p ]; then echo "$f $(cat $p 2>&1 | wc -c)"; fi
done
cat /proc/keys
grep -c '^MemTotal:' /proc/meminfo
grep -c '^processor' /proc/cpuinfo >/dev/null && echo cpuinfo-ok
cat /proc/sys/kernel/cap_last_cap >/dev/null && echo sys-readable
readlink /proc/self/exe
for d in ` + strings.Join(initproc.ProcReadOnly(), " ") + `; do
	awk -v m=/proc/$d '$5 == m { split($6, o, ","); print m, o[1] }' /proc/self/mountinfo
done
`
	stdin, release := io.Pipe()
	defer release.Close()
	var out, errb syncBuffer
	sb, err := Start(context.Background(), quick("sh", "-c", script), Stdio{Stdin: stdin, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	giveKey(t, id, sb.hostUID)
	seen := hostSees(t, sb.hostUID, desc)
	if _, err := release.Write([]byte("go\n")); err != nil {
		t.Fatalf("starting the reads: %v", err)
	}
	release.Close()
	res, err := sb.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, out.String(), errb.String())
	}
	if !seen {
		t.Fatalf("the sandbox's host uid %d does not list the key on the host; the test cannot tell", sb.hostUID)
	}
	got := out.String()
	if strings.Contains(got, desc) {
		t.Fatalf("the host's key is listed inside the sandbox:\n%s", got)
	}
	for _, f := range initproc.ProcMasked() {
		if _, err := os.Stat("/proc/" + f); err != nil {
			continue
		}
		if !strings.Contains(got, "\n"+f+" 0\n") && !strings.HasPrefix(got, f+" 0\n") {
			t.Errorf("/proc/%s is not empty inside the sandbox:\n%s", f, got)
		}
	}
	for _, w := range []string{"\n1\n", "cpuinfo-ok\n", "sys-readable\n", "/usr/bin/readlink\n", "/proc/sys ro\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q: what runtimes read from /proc must still work\n%s", w, got)
		}
	}
}
