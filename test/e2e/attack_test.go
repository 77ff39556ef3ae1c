package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func randomMarker(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "MCPBOX-CANARY-" + hex.EncodeToString(b)
}

// TestHostFilesInvisible plants a fake ~/.ssh/id_rsa on the host and tries
// to read it, list home directories and find host-only paths.
func TestHostFilesInvisible(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		home := m.dir(t)
		canary := randomMarker(t)
		if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o755); err != nil {
			t.Fatal(err)
		}
		key := filepath.Join(home, ".ssh", "id_rsa")
		m.writeFile(t, key, canary, 0o644) // world-readable: only the sandbox may stop it
		script := `cat ` + key + ` /etc/shadow /root/.bashrc 2>/dev/null; ls /home /root /var /run /sys /srv /mnt 2>/dev/null; ` +
			`grep -rs ` + canary + ` /etc /workspace /tmp /dev 2>/dev/null; echo done`
		r := m.sh(t, script)
		want(t, r, 0, "done")
		if strings.Contains(r.stdout, canary) {
			t.Fatalf("host canary readable in the sandbox:\n%s", r)
		}
		if strings.TrimSpace(r.stdout) != "done" {
			t.Fatalf("host paths visible in the sandbox:\n%s", r)
		}
	})
}

// TestInputReadOnly tries to write, delete and chmod in /workspace/input.
func TestInputReadOnly(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		in := m.dir(t)
		m.writeFile(t, filepath.Join(in, "keep.txt"), "original", 0o644)
		r := m.sh(t, `cat /workspace/input/keep.txt; echo; `+
			`echo evil > /workspace/input/keep.txt || echo write-denied; `+
			`rm -f /workspace/input/keep.txt || echo rm-denied; `+
			`touch /workspace/input/new || echo create-denied; `+
			`chmod 777 /workspace/input/keep.txt || echo chmod-denied`, "--input", in)
		want(t, r, 0, "original", "write-denied", "rm-denied", "create-denied", "chmod-denied")
		got, err := os.ReadFile(filepath.Join(in, "keep.txt"))
		if err != nil || string(got) != "original" {
			t.Fatalf("input file changed: %q, %v", got, err)
		}
		if _, err := os.Stat(filepath.Join(in, "new")); err == nil {
			t.Fatal("sandbox created a file in its input")
		}
	})
}

// TestOutputEscape writes through .. and through a symlink planted in the
// output dir that points at a host directory.
func TestOutputEscape(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		parent := m.dir(t)
		out := filepath.Join(parent, "out")
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		hostDir := filepath.Join(parent, "host-secrets")
		if err := os.Mkdir(hostDir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(hostDir, 0o777); err != nil {
			t.Fatal(err)
		}
		canary := randomMarker(t)
		m.writeFile(t, filepath.Join(hostDir, "token"), canary, 0o666)
		if err := os.Symlink(hostDir, filepath.Join(out, "link")); err != nil {
			t.Fatal(err)
		}
		if !m.root() {
			_ = os.Chown(out, m.uid, m.uid)
			_ = os.Chown(parent, m.uid, m.uid)
		}
		r := m.sh(t, `cat /workspace/output/link/token; echo x > /workspace/output/link/token || echo link-denied; `+
			`echo x > /workspace/output/../escaped || echo dotdot-denied; `+
			`echo x > /workspace/output/../../escaped2 || echo dotdot2-denied; `+
			`echo ok > /workspace/output/legit && echo wrote`, "--output", out)
		want(t, r, 0, "link-denied", "dotdot-denied", "dotdot2-denied", "wrote")
		if strings.Contains(r.stdout, canary) {
			t.Fatalf("read the host file through a planted symlink:\n%s", r)
		}
		if got, _ := os.ReadFile(filepath.Join(hostDir, "token")); string(got) != canary {
			t.Fatalf("host file changed through the symlink: %q", got)
		}
		for _, p := range []string{filepath.Join(parent, "escaped"), filepath.Join(filepath.Dir(parent), "escaped2")} {
			if _, err := os.Lstat(p); err == nil {
				t.Fatalf("sandbox wrote %s outside its output", p)
			}
		}
		// Files the sandbox writes belong to the invoking user.
		fi, err := os.Stat(filepath.Join(out, "legit"))
		if err != nil {
			t.Fatal(err)
		}
		wantUID := os.Getuid()
		if !m.root() {
			wantUID = m.uid
		}
		if uid := fileUID(fi); uid != wantUID {
			t.Fatalf("output file owned by uid %d, want the invoking user %d", uid, wantUID)
		}
	})
}

// TestHostProcessesInvisible starts a host process with a secret in its
// environment and looks for it from inside.
func TestHostProcessesInvisible(t *testing.T) {
	marker := randomMarker(t)
	host := exec.Command("sleep", "60")
	host.Env = []string{"MCPBOX_SECRET=" + marker}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	forEachMode(t, func(t *testing.T, m mode) {
		r := m.sh(t, `cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -c MCPBOX_SECRET; `+
			`ls /proc | grep -c '^[0-9]'; kill -0 `+strconv.Itoa(host.Process.Pid)+` 2>&1 || echo kill-denied; `+
			`cat /proc/1/environ 2>&1 >/dev/null || echo init-hidden`)
		lines := strings.Fields(r.stdout)
		if len(lines) < 2 || lines[0] != "0" {
			t.Fatalf("host environment visible:\n%s", r)
		}
		if n, _ := strconv.Atoi(lines[1]); n > 4 {
			t.Fatalf("%d processes visible, want only the sandbox's own:\n%s", n, r)
		}
		want(t, r, 0, "kill-denied", "init-hidden")
		if strings.Contains(r.stdout, marker) {
			t.Fatalf("host secret leaked:\n%s", r)
		}
	})
}

// TestHostEnvNotInherited sets a secret in mcpbox's own environment.
func TestHostEnvNotInherited(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		marker := randomMarker(t)
		ctx := t.Context()
		cmd := m.command(ctx, append(append([]string{"exec"}, m.flags...), "--env", "GIVEN=yes", "--", "/usr/bin/env")...)
		cmd.Env = append(cmd.Env, "AWS_SECRET_ACCESS_KEY="+marker, "GITHUB_TOKEN="+marker)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if strings.Contains(string(out), marker) {
			t.Fatalf("host env leaked:\n%s", out)
		}
		for _, k := range []string{"GIVEN=yes", "HOME=/tmp/home", "PATH="} {
			if !strings.Contains(string(out), k) {
				t.Fatalf("env lacks %s:\n%s", k, out)
			}
		}
	})
}

// TestSyscallAttacks runs the attack helper: every privileged operation
// must be refused.
func TestSyscallAttacks(t *testing.T) {
	attacks := []string{"ptrace", "traceme", "mount", "umount", "unshare-user", "unshare-net",
		"chroot", "keyctl", "rawsock", "packet", "mptcp", "bpf", "iouring", "setuid0",
		"tgkill", "prlimit-init"}
	forEachMode(t, func(t *testing.T, m mode) {
		r := m.exec(t, "", "--input", attackDir, "--", "/workspace/input/attack", "hello")
		want(t, r, 0, "hello: ok") // a static Go binary runs
		for _, a := range attacks {
			t.Run(a, func(t *testing.T) {
				r := m.exec(t, "", "--input", attackDir, "--", "/workspace/input/attack", a)
				if r.code != 0 || !strings.HasPrefix(r.stdout, a+": ") {
					t.Fatalf("attack helper failed:\n%s", r)
				}
				if strings.Contains(r.stdout, a+": ok") {
					t.Fatalf("%s succeeded inside the sandbox", a)
				}
			})
		}
	})
}

// TestNoNetwork tries TCP to servers on the host's loopback and on its
// other addresses, and DNS.
func TestNoNetwork(t *testing.T) {
	var targets []string
	for _, addr := range hostAddrs(t) {
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
		if err != nil {
			t.Logf("listening on %s: %v", addr, err)
			continue
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("host-service\n"))
				c.Close()
			}
		}()
		targets = append(targets, ln.Addr().String())
	}
	if len(targets) == 0 {
		t.Fatal("no host address to listen on")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		for _, target := range targets {
			r := m.exec(t, "", "--input", attackDir, "--", "/workspace/input/attack", "connect", target)
			if r.code != 0 || strings.Contains(r.stdout, "connect: ok") || !strings.HasPrefix(r.stdout, "connect: ") {
				t.Fatalf("connect %s from the sandbox:\n%s", target, r)
			}
		}
		r := m.exec(t, "", "--input", attackDir, "--", "/workspace/input/attack", "dns", "localhost.localdomain.example.com")
		if r.code != 0 || strings.Contains(r.stdout, "dns: ok") {
			t.Fatalf("DNS resolved from the sandbox:\n%s", r)
		}
		r = m.sh(t, `cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '`)
		if got := strings.Fields(r.stdout); len(got) != 1 || got[0] != "lo" {
			t.Fatalf("interfaces in the sandbox %q, want only lo\n%s", got, r)
		}
	})
}

// hostAddrs lists 127.0.0.1 and the host's non-loopback unicast IPv4
// addresses (the tests only listen on them; nothing leaves the machine).
func hostAddrs(t *testing.T) []string {
	addrs := []string{"127.0.0.1"}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ifaddrs {
		ipn, ok := a.(*net.IPNet)
		if ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && ipn.IP.IsGlobalUnicast() {
			addrs = append(addrs, ipn.IP.String())
		}
	}
	return addrs
}

// TestCapabilitiesAndFilters reads the workload's own status.
func TestCapabilitiesAndFilters(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		r := m.sh(t, `id -u; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status`)
		want(t, r, 0, "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
			"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2")
		if uid := strings.Fields(r.stdout)[0]; uid == "0" {
			t.Fatalf("workload runs as uid 0 inside")
		}
	})
}

// TestHostUIDNeverRoot finds a sandboxed process from the host and checks
// its host uid.
func TestHostUIDNeverRoot(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		marker := strconv.FormatInt(time.Now().UnixNano()%1000000+100000, 10)
		done := make(chan result, 1)
		go func() { done <- m.sh(t, "exec sleep "+marker+".5") }()
		var pid int
		for deadline := time.Now().Add(20 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			pid = findProcess("sleep\x00" + marker + ".5\x00")
		}
		if pid == 0 {
			t.Fatal("sandboxed process not found from the host")
		}
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		uids := statusField(string(status), "Uid:")
		for _, u := range uids {
			if u == "0" {
				t.Fatalf("sandboxed process has host uid 0: %v", uids)
			}
		}
		if !m.root() && uids[0] != strconv.Itoa(m.uid) {
			t.Fatalf("host uid %v, want the invoking user %d", uids, m.uid)
		}
		if m.root() {
			if n, _ := strconv.Atoi(uids[0]); n < 1<<20 {
				t.Fatalf("host uid %d is in the range of real accounts", n)
			}
		}
		_ = killPid(pid, cmdlineEnds(pid, "sleep\x00"+marker+".5\x00"))
		<-done
	})
}

// TestNoExecFromWritable: /tmp and output are not executable unless asked.
func TestNoExecFromWritable(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		out := m.dir(t)
		script := `cp /bin/true /tmp/t && /tmp/t && echo tmp-exec; cp /bin/true ./t && ./t && echo out-exec; ` +
			`/workspace/input/attack hello`
		r := m.sh(t, script, "--output", out, "--input", attackDir)
		want(t, r, 0, "hello: ok")
		if strings.Contains(r.stdout, "tmp-exec") || strings.Contains(r.stdout, "out-exec") {
			t.Fatalf("executed a file from a writable place:\n%s", r)
		}
		r = m.sh(t, script, "--output", out, "--input", attackDir, "--exec-writable")
		want(t, r, 0, "tmp-exec", "out-exec")
	})
}

// TestInheritedFDsClosed hands mcpbox an open secret file besides stdio, as
// a careless parent process would: the workload must not get it.
func TestInheritedFDsClosed(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		canary := randomMarker(t)
		secret := filepath.Join(dir, "secret")
		m.writeFile(t, secret, canary, 0o600)
		f, err := os.Open(secret)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd := m.command(t.Context(), append(append([]string{"exec"}, m.flags...), "--", "sh", "-c",
			`ls /proc/self/fd | tr '\n' ' '; echo; cat <&3; cat /proc/self/fd/3; cat <&4; echo end`)...)
		cmd.ExtraFiles = []*os.File{f, f}
		out, _ := cmd.Output()
		if strings.Contains(string(out), canary) {
			t.Fatalf("inherited fd readable in the sandbox:\n%s", out)
		}
		if first := strings.SplitN(string(out), "\n", 2)[0]; strings.TrimSpace(first) != "0 1 2 3" {
			// 3 is ls's own directory fd.
			t.Fatalf("fds in the sandbox %q, want only stdio\n%s", first, out)
		}
	})
}

// TestInitShieldedFromWorkload: the workload cannot signal or crash its
// init, and shares nothing with it worth attacking.
func TestInitShieldedFromWorkload(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		r := m.sh(t, `for s in ABRT SEGV TERM USR2 KILL STOP; do kill -$s 1 2>/dev/null && echo "sent $s"; done; sleep 0.3; echo alive; ulimit -c`)
		want(t, r, 0, "alive")
		if !strings.HasSuffix(strings.TrimSpace(r.stdout), "0") {
			t.Fatalf("core files enabled:\n%s", r)
		}
		if strings.Contains(r.stdout, "sent") {
			t.Fatalf("workload signalled its init:\n%s", r)
		}
	})
}

// TestNoSetuidOnHost tries to plant setuid and setgid files in the output:
// as root the output is idmapped to root, so such a file would be a
// setuid-root binary on the host.
func TestNoSetuidOnHost(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		out := m.dir(t)
		r := m.sh(t, `cp /usr/bin/id id && chmod 0755 id && echo copied; chmod 4755 id || echo suid-denied; `+
			`chmod g+s id || echo sgid-denied; chmod g+s . || echo dir-sgid-denied; `+
			`python3 -c "import os; os.open('py', os.O_CREAT|os.O_WRONLY, 0o4755)" 2>/dev/null || echo open-denied`,
			"--output", out)
		want(t, r, 0, "copied", "suid-denied", "sgid-denied", "dir-sgid-denied", "open-denied")
		err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("%s on the host has mode %v", p, fi.Mode())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestHostKernelBudgetsKept: per-user kernel budgets (here inotify
// instances) that a sandbox exhausts are its own host uid's, not those of
// the user who started it — for host root they would otherwise be root's.
func TestHostKernelBudgetsKept(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("checks host root's budget")
	}
	m := modes(t)[0] // root
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := m.command(ctx, append(append([]string{"exec"}, m.flags...), "--input", attackDir, "--", "/workspace/input/attack", "inotify-hog")...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "inotify-hog: holding") {
		t.Fatalf("hog did not start: %q %v", line, err)
	}
	fd, err := inotifyInit()
	if err != nil {
		t.Fatalf("host root cannot create an inotify instance while a sandbox is %s: %v", strings.TrimSpace(line), err)
	}
	syscall.Close(fd)
}
