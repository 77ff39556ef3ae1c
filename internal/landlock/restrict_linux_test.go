package landlock

import (
	"context"
	"debug/elf"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func requireABI(t *testing.T, min int) int {
	t.Helper()
	abi := ABI()
	if abi == 0 {
		t.Skipf("landlock unavailable: kernel built without it or disabled at boot")
	}
	if abi < min {
		t.Skipf("needs landlock ABI %d, kernel has %d", min, abi)
	}
	return abi
}

func TestABI(t *testing.T) {
	abi := ABI()
	t.Logf("landlock ABI %d", abi)
	if abi < 0 {
		t.Fatalf("ABI() = %d, want >= 0", abi)
	}
	// Cross-check against the kernel's list of active LSMs when securityfs
	// is mounted: Landlock is active exactly when the version query works.
	lsm, err := os.ReadFile("/sys/kernel/security/lsm")
	if err != nil {
		t.Logf("not cross-checking with the LSM list: %v", err)
		return
	}
	active := slices.Contains(strings.Split(strings.TrimSpace(string(lsm)), ","), "landlock")
	if active != (abi > 0) {
		t.Errorf("ABI() = %d, but active LSMs are %q", abi, lsm)
	}
}

func TestConstantsMatchUnix(t *testing.T) {
	tests := []struct {
		name string
		ours uint64
		unix uint64
	}{
		{"execute", uint64(Execute), unix.LANDLOCK_ACCESS_FS_EXECUTE},
		{"write_file", uint64(WriteFile), unix.LANDLOCK_ACCESS_FS_WRITE_FILE},
		{"read_file", uint64(ReadFile), unix.LANDLOCK_ACCESS_FS_READ_FILE},
		{"read_dir", uint64(ReadDir), unix.LANDLOCK_ACCESS_FS_READ_DIR},
		{"remove_dir", uint64(RemoveDir), unix.LANDLOCK_ACCESS_FS_REMOVE_DIR},
		{"remove_file", uint64(RemoveFile), unix.LANDLOCK_ACCESS_FS_REMOVE_FILE},
		{"make_char", uint64(MakeChar), unix.LANDLOCK_ACCESS_FS_MAKE_CHAR},
		{"make_dir", uint64(MakeDir), unix.LANDLOCK_ACCESS_FS_MAKE_DIR},
		{"make_reg", uint64(MakeReg), unix.LANDLOCK_ACCESS_FS_MAKE_REG},
		{"make_sock", uint64(MakeSock), unix.LANDLOCK_ACCESS_FS_MAKE_SOCK},
		{"make_fifo", uint64(MakeFifo), unix.LANDLOCK_ACCESS_FS_MAKE_FIFO},
		{"make_block", uint64(MakeBlock), unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK},
		{"make_sym", uint64(MakeSym), unix.LANDLOCK_ACCESS_FS_MAKE_SYM},
		{"refer", uint64(Refer), unix.LANDLOCK_ACCESS_FS_REFER},
		{"truncate", uint64(Truncate), unix.LANDLOCK_ACCESS_FS_TRUNCATE},
		{"ioctl_dev", uint64(IoctlDev), unix.LANDLOCK_ACCESS_FS_IOCTL_DEV},
		{"resolve_unix", uint64(ResolveUnix), unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX},
		{"net bind_tcp", netBindTCP, unix.LANDLOCK_ACCESS_NET_BIND_TCP},
		{"net connect_tcp", netConnectTCP, unix.LANDLOCK_ACCESS_NET_CONNECT_TCP},
		{"scope abstract_unix", scopeAbstractUnix, unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET},
		{"scope signal", scopeSignal, unix.LANDLOCK_SCOPE_SIGNAL},
	}
	for _, tt := range tests {
		if tt.ours != tt.unix {
			t.Errorf("%s = %#x, x/sys/unix has %#x", tt.name, tt.ours, tt.unix)
		}
	}
}

// layout is a scratch tree with one directory per kind of rule.
type layout struct {
	ro, rw, rw2, noRefer, noTrunc, noRule, execDir, single string
}

func newLayout(t *testing.T) layout {
	t.Helper()
	root := t.TempDir()
	l := layout{
		ro:      filepath.Join(root, "ro"),
		rw:      filepath.Join(root, "rw"),
		rw2:     filepath.Join(root, "rw2"),
		noRefer: filepath.Join(root, "norefer"),
		noTrunc: filepath.Join(root, "notrunc"),
		noRule:  filepath.Join(root, "norule"),
		execDir: filepath.Join(root, "exec"),
		single:  filepath.Join(root, "single"),
	}
	trueBin, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatalf("reading /bin/true: %v", err)
	}
	files := map[string][]byte{
		"ro/file.txt":        []byte("ro"),
		"rw/file.txt":        []byte("rw"),
		"rw/unlink-me":       nil,
		"rw/a":               nil,
		"rw/b":               nil,
		"rw/c":               nil,
		"rw/true":            trueBin,
		"norefer/d":          nil,
		"norefer/e":          nil,
		"notrunc/t.txt":      []byte("keep"),
		"norule/secret.txt":  []byte("secret"),
		"norule/true":        trueBin,
		"exec/true":          trueBin,
		"single/allowed.txt": []byte("allowed"),
		"single/other.txt":   []byte("other"),
	}
	for _, d := range []string{l.ro, l.rw, l.rw2, l.noRefer, l.noTrunc, l.noRule, l.execDir, l.single} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(root, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// systemRules let the child exec /bin/true and sleep: Read|Exec on /usr, on
// the real directory of /bin/true and on its ELF interpreter, Read on /etc.
func systemRules(t *testing.T) []Rule {
	t.Helper()
	rules := []Rule{{Path: "/usr", Access: Read | Exec}, {Path: "/etc", Access: Read}}
	real, err := filepath.EvalSymlinks("/bin/true")
	if err != nil {
		t.Fatalf("resolving /bin/true: %v", err)
	}
	rules = append(rules, Rule{Path: filepath.Dir(real), Access: Read | Exec})
	f, err := elf.Open(real)
	if err != nil {
		t.Fatalf("reading %s: %v", real, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			t.Fatalf("reading interpreter of %s: %v", real, err)
		}
		interp, err := filepath.EvalSymlinks(strings.TrimRight(string(b), "\x00"))
		if err != nil {
			t.Fatalf("resolving interpreter of %s: %v", real, err)
		}
		rules = append(rules, Rule{Path: filepath.Dir(interp), Access: Read | Exec})
	}
	return rules
}

func TestRestrictFilesystem(t *testing.T) {
	abi := requireABI(t, 1)
	l := newLayout(t)
	policy := Policy{Rules: append(systemRules(t),
		Rule{Path: l.ro, Access: Read},
		Rule{Path: l.rw, Access: Read | Write},
		Rule{Path: l.rw2, Access: Read | Write},
		Rule{Path: l.noRefer, Access: Read | (Write &^ Refer)},
		Rule{Path: l.noTrunc, Access: Read | WriteFile},
		Rule{Path: l.execDir, Access: Read | Exec},
		// Rules on files: the directory rights in Read|Write must be masked.
		Rule{Path: filepath.Join(l.single, "allowed.txt"), Access: Read | Write},
		Rule{Path: "/dev/null", Access: Read | Write},
		Rule{Path: "/dev/zero", Access: Read | IoctlDev},
	)}
	j := filepath.Join
	probes := []probe{
		{Name: "read in ro", Op: "read", Path: j(l.ro, "file.txt")},
		{Name: "list ro", Op: "readdir", Path: l.ro},
		{Name: "write in ro denied", Op: "write", Path: j(l.ro, "file.txt"), Want: unix.EACCES},
		{Name: "create in ro denied", Op: "create", Path: j(l.ro, "new"), Want: unix.EACCES},
		{Name: "mkdir in ro denied", Op: "mkdir", Path: j(l.ro, "newdir"), Want: unix.EACCES},
		{Name: "unlink in ro denied", Op: "unlink", Path: j(l.ro, "file.txt"), Want: unix.EACCES},
		{Name: "truncate in ro denied", Op: "truncate", Path: j(l.ro, "file.txt"), Want: unix.EACCES, MinABI: 3},
		{Name: "read outside rules denied", Op: "read", Path: j(l.noRule, "secret.txt"), Want: unix.EACCES},
		{Name: "list outside rules denied", Op: "readdir", Path: l.noRule, Want: unix.EACCES},
		{Name: "write outside rules denied", Op: "write", Path: j(l.noRule, "secret.txt"), Want: unix.EACCES},
		{Name: "write in rw", Op: "write", Path: j(l.rw, "file.txt")},
		{Name: "create in rw", Op: "create", Path: j(l.rw, "new")},
		{Name: "mkdir in rw", Op: "mkdir", Path: j(l.rw, "newdir")},
		{Name: "unlink in rw", Op: "unlink", Path: j(l.rw, "unlink-me")},
		{Name: "truncate in rw", Op: "truncate", Path: j(l.rw, "file.txt")},
		{Name: "open O_TRUNC in rw", Op: "open-trunc", Path: j(l.rw, "file.txt")},
		{Name: "write without truncate right", Op: "write", Path: j(l.noTrunc, "t.txt")},
		{Name: "open O_TRUNC without truncate right denied", Op: "open-trunc", Path: j(l.noTrunc, "t.txt"), Want: unix.EACCES, MinABI: 3},
		{Name: "truncate without truncate right denied", Op: "truncate", Path: j(l.noTrunc, "t.txt"), Want: unix.EACCES, MinABI: 3},
		{Name: "create without make_reg denied", Op: "create", Path: j(l.noTrunc, "new"), Want: unix.EACCES},
		{Name: "rename between refer dirs", Op: "rename", Path: j(l.rw, "a"), Path2: j(l.rw2, "a"), MinABI: 2},
		{Name: "rename into dir without refer denied", Op: "rename", Path: j(l.rw, "b"), Path2: j(l.noRefer, "b"), Want: unix.EXDEV},
		{Name: "link into dir without refer denied", Op: "link", Path: j(l.rw, "c"), Path2: j(l.noRefer, "c"), Want: unix.EXDEV},
		{Name: "rename out of dir without refer denied", Op: "rename", Path: j(l.noRefer, "d"), Path2: j(l.rw, "d"), Want: unix.EXDEV},
		{Name: "rename within dir without refer", Op: "rename", Path: j(l.noRefer, "e"), Path2: j(l.noRefer, "e2")},
		{Name: "exec /bin/true", Op: "exec", Path: "/bin/true"},
		{Name: "exec copy in exec dir", Op: "exec", Path: j(l.execDir, "true")},
		{Name: "exec copy in rw denied", Op: "exec", Path: j(l.rw, "true"), Want: unix.EACCES},
		{Name: "exec copy outside rules denied", Op: "exec", Path: j(l.noRule, "true"), Want: unix.EACCES},
		{Name: "read file with file rule", Op: "read", Path: j(l.single, "allowed.txt")},
		{Name: "write file with file rule", Op: "write", Path: j(l.single, "allowed.txt")},
		{Name: "read sibling of file rule denied", Op: "read", Path: j(l.single, "other.txt"), Want: unix.EACCES},
		{Name: "list dir of file rule denied", Op: "readdir", Path: l.single, Want: unix.EACCES},
		{Name: "write /dev/null", Op: "write", Path: "/dev/null"},
		{Name: "device ioctl without ioctl_dev denied", Op: "ioctl-tcgets", Path: "/dev/null", Want: unix.EACCES, MinABI: 5},
		{Name: "device ioctl with ioctl_dev", Op: "ioctl-tcgets", Path: "/dev/zero", Want: unix.ENOTTY},
	}
	t.Logf("landlock ABI %d", abi)
	checkProbes(t, childSpec{Policy: policy, Probes: probes})

	// The denied operations must have left no trace in the tree.
	for _, p := range []string{j(l.ro, "new"), j(l.ro, "newdir"), j(l.noRefer, "b"), j(l.noRefer, "c"), j(l.noTrunc, "new")} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after a denied operation (lstat: %v)", p, err)
		}
	}
	if b, err := os.ReadFile(j(l.noTrunc, "t.txt")); err != nil || string(b) != "xeep" {
		t.Errorf("notrunc/t.txt = %q, %v; want the write without truncation, %q", b, err, "xeep")
	}
}

// startSleep starts a process outside any Landlock domain and kills it at
// cleanup.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, "sleep", "60")
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting sleep: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		cancel()
	})
	return cmd
}

func listenAbstract(t *testing.T) string {
	t.Helper()
	name := "@mcpbox-landlock-test-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000000")
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatalf("listening on abstract socket: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return name
}

func TestRestrictScopes(t *testing.T) {
	requireABI(t, 6)
	victim := startSleep(t)
	sock := listenAbstract(t)
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("finding sleep: %v", err)
	}
	pid := victim.Process.Pid
	tests := []struct {
		name   string
		policy Policy
		probes []probe
	}{{
		name:   "scoped",
		policy: Policy{Rules: systemRules(t), ScopeSignals: true, ScopeAbstractUnix: true},
		probes: []probe{
			{Name: "signal 0 outside domain denied", Op: "kill", Pid: pid, Sig: 0, Want: unix.EPERM},
			{Name: "SIGTERM outside domain denied", Op: "kill", Pid: pid, Sig: int(unix.SIGTERM), Want: unix.EPERM},
			{Name: "signal own child", Op: "kill-own", Path: sleepPath},
			{Name: "connect abstract socket outside domain denied", Op: "connect-abstract", Path: sock, Want: unix.EPERM},
		},
	}, {
		name:   "unscoped control",
		policy: Policy{Rules: systemRules(t)},
		probes: []probe{
			{Name: "signal 0 outside domain", Op: "kill", Pid: pid, Sig: 0},
			{Name: "connect abstract socket outside domain", Op: "connect-abstract", Path: sock},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProbes(t, childSpec{Policy: tt.policy, Probes: tt.probes})
			if err := unix.Kill(pid, 0); err != nil {
				t.Errorf("sleep outside the domain is gone after the child ran: %v", err)
			}
		})
	}
}

func listenTCP(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening on loopback: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func TestRestrictNet(t *testing.T) {
	requireABI(t, 4)
	allowed, other := listenTCP(t), listenTCP(t)
	// A port that was free a moment ago, for the bind probe.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening on loopback: %v", err)
	}
	free := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	tests := []struct {
		name   string
		policy Policy
		probes []probe
	}{{
		name:   "restricted",
		policy: Policy{Net: &NetPolicy{ConnectTCP: []uint16{uint16(allowed)}, BindTCP: []uint16{uint16(free)}}},
		probes: []probe{
			{Name: "connect to allowed port", Op: "connect-tcp", Port: allowed},
			{Name: "connect to other port denied", Op: "connect-tcp", Port: other, Want: unix.EACCES},
			{Name: "bind allowed port", Op: "bind-tcp", Port: free},
			{Name: "bind ephemeral port denied", Op: "bind-tcp", Port: 0, Want: unix.EACCES},
		},
	}, {
		name:   "nil Net control",
		policy: Policy{},
		probes: []probe{
			{Name: "connect to other port", Op: "connect-tcp", Port: other},
			{Name: "bind ephemeral port", Op: "bind-tcp", Port: 0},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProbes(t, childSpec{Policy: tt.policy, Probes: tt.probes})
		})
	}
}

// onThrowawayThread runs fn on a locked thread that exits with its goroutine,
// so a Restrict that wrongly succeeds cannot restrict the test process.
func onThrowawayThread(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with us
		fn()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Restrict did not return within 10s")
	}
}

func TestRestrictErrors(t *testing.T) {
	requireABI(t, 1)
	dir := t.TempDir()
	missing := filepath.Join(dir, "does-not-exist")
	tests := []struct {
		name     string
		rules    []Rule
		wantIn   []string
		notExist bool
	}{
		{
			name:     "missing path",
			rules:    []Rule{{Path: dir, Access: Read}, {Path: missing, Access: Read}},
			wantIn:   []string{"adding landlock rule for " + missing + ":"},
			notExist: true,
		},
		{
			name:   "unknown access bits",
			rules:  []Rule{{Path: dir, Access: Read | 1<<40}},
			wantIn: []string{"adding landlock rule for " + dir + ":", "unknown access bits 0x10000000000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			onThrowawayThread(t, func() { _, err = Restrict(Policy{Rules: tt.rules}) })
			if err == nil {
				t.Fatal("Restrict succeeded, want an error")
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if got := errors.Is(err, fs.ErrNotExist); got != tt.notExist {
				t.Errorf("errors.Is(%v, fs.ErrNotExist) = %v, want %v", err, got, tt.notExist)
			}
		})
	}
}
