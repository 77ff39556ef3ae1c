// Package e2e tests the built mcpbox binary from the outside, as root and
// as an unprivileged user, with real programs and real third-party MCP
// servers. Every isolation claim has an attack here that must fail.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"mcpbox/internal/kube/kubetest"
)

var (
	mcpboxBin string // the built binary
	attackDir string // holds the attack helper; mounted read-only
	binDir    string
)

// nobody is the unprivileged user the tests run mcpbox as.
const nobody = 65534

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if runtime.GOOS != "linux" {
		fmt.Println("e2e: linux only")
		return 0
	}
	var err error
	// World-traversable, so the unprivileged runs can execute the binaries.
	binDir, err = os.MkdirTemp("", "mcpbox-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(binDir)
	attackDir = filepath.Join(binDir, "attack")
	if err = os.Chmod(binDir, 0o755); err == nil {
		err = buildAll()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building binaries:", err)
		return 1
	}
	defer kubetest.StopShared()
	return m.Run()
}

func buildAll() error {
	mcpboxBin = filepath.Join(binDir, "mcpbox")
	if err := os.Mkdir(attackDir, 0o755); err != nil {
		return err
	}
	builds := [][]string{
		{"-o", mcpboxBin, "mcpbox/cmd/mcpbox"},
		{"-o", filepath.Join(attackDir, "attack"), "mcpbox/test/e2e/testdata/attack"},
	}
	for _, b := range builds {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, b...)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("go build %s: %v\n%s", b[len(b)-1], err, out)
		}
	}
	return nil
}

// mode is who runs mcpbox: host root, or an unprivileged user.
type mode struct {
	name string
	uid  int // -1: the test's own user
	// extra flags every sandbox of this mode needs on this host
	flags []string
	// bin is the mcpbox to run; "": mcpboxBin
	bin string
}

func (m mode) root() bool { return m.uid < 0 }

// modes returns the ways to run mcpbox here. The unprivileged mode needs
// root to switch users and accepts missing cgroups, which an unprivileged
// user only has with a delegated subtree (see TestDelegatedCgroups).
func modes(t *testing.T) []mode {
	ms := []mode{{name: "root", uid: -1}}
	if os.Geteuid() != 0 {
		t.Log("not root: testing as the current user only")
		return []mode{{name: "user", uid: -1, flags: []string{"--allow-degraded=cgroups"}}}
	}
	return append(ms, mode{name: "unprivileged", uid: nobody, flags: []string{"--allow-degraded=cgroups"}})
}

// forEachMode runs f as a subtest per mode.
func forEachMode(t *testing.T, f func(t *testing.T, m mode)) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}

// result is how one mcpbox run ended.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// command prepares an mcpbox invocation in mode m.
func (m mode) command(ctx context.Context, args ...string) *exec.Cmd {
	bin := mcpboxBin
	if m.bin != "" {
		bin = m.bin
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LANG=C.UTF-8"}
	cmd.WaitDelay = 5 * time.Second
	if !m.root() {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: uint32(m.uid), Gid: uint32(m.uid), Groups: []uint32{}},
		}
	}
	return cmd
}

// exec runs `mcpbox exec [mode flags] FLAGS -- ARGV` with a 60 s bound.
// Use "--" inside args to separate flags and the command.
func (m mode) exec(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return m.mcpbox(t, 60*time.Second, stdin, append(append([]string{"exec"}, m.flags...), args...)...)
}

// mcpbox runs `mcpbox ARGS` as m's user with stdin, bounded by timeout;
// a command killed by signal N reports 128+N.
func (m mode) mcpbox(t *testing.T, timeout time.Duration, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := m.command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.code = 128 + int(ws.Signal())
		}
	default:
		t.Fatalf("running mcpbox %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("mcpbox %v did not finish in time:\n%s", args, r)
	}
	return r
}

// sh runs a shell script in a sandbox with the given flags.
func (m mode) sh(t *testing.T, script string, flags ...string) result {
	t.Helper()
	return m.exec(t, "", append(flags, "--", "/bin/sh", "-c", script)...)
}

// dir makes a temp dir owned by the mode's user, on a world-traversable
// path so an unprivileged mcpbox can reach it.
func (m mode) dir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if !m.root() {
		if err := os.Chown(d, m.uid, m.uid); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// writeFile writes a file in a mode's dir, owned by the mode's user.
func (m mode) writeFile(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if !m.root() {
		if err := os.Chown(path, m.uid, m.uid); err != nil {
			t.Fatal(err)
		}
	}
}

// want fails unless r exited with code and its stdout contains every
// substring.
func want(t *testing.T, r result, code int, substrings ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\n%s", r.code, code, r)
	}
	for _, s := range substrings {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("stdout lacks %q\n%s", s, r)
		}
	}
}

// requireNode returns the node_modules dir of the npm peers, failing when
// CI promised them (MCPBOX_E2E_REQUIRE=1) and skipping otherwise.
func requireNode(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("node/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "@modelcontextprotocol/server-filesystem")); err != nil {
		if os.Getenv("MCPBOX_E2E_REQUIRE") == "1" {
			t.Fatalf("npm peers missing (run: npm ci --prefix test/e2e/node): %v", err)
		}
		t.Skip("npm peers not installed: npm ci --prefix test/e2e/node")
	}
	if !worldReachable(dir) {
		// The checkout may sit under a private home; the unprivileged runs
		// need a copy they can read.
		nodeCopy.Do(func() {
			dst := filepath.Join(binDir, "node_modules")
			out, err := exec.Command("cp", "-a", dir, dst).CombinedOutput()
			if err == nil {
				err = exec.Command("chmod", "-R", "a+rX", dst).Run()
			}
			if err != nil {
				nodeCopyErr = fmt.Errorf("copying node_modules: %v %s", err, out)
			}
		})
		if nodeCopyErr != nil {
			t.Fatal(nodeCopyErr)
		}
		return filepath.Join(binDir, "node_modules")
	}
	return dir
}

var (
	nodeCopy    sync.Once
	nodeCopyErr error
)

// worldReachable reports whether every directory from / to dir lets
// others search it.
func worldReachable(dir string) bool {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o005 != 0o005 {
			return false
		}
		if p == "/" {
			return true
		}
	}
}

// goBuild builds the Go package pkg (an import path, e.g.
// "mcpbox/test/e2e/testdata/mcpserver") once per test binary into the
// world-readable bin dir and returns the directory holding it, named after
// the package's last element. Mount that directory read-only to run the
// program in a sandbox.
func goBuild(t testing.TB, pkg string) string {
	t.Helper()
	builtMu.Lock()
	defer builtMu.Unlock()
	if dir, ok := built[pkg]; ok {
		return dir
	}
	name := filepath.Base(pkg)
	dir := filepath.Join(binDir, "pkg-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = dir
	return dir
}

var (
	builtMu sync.Mutex
	built   = map[string]string{}
)

// lockedBuffer collects what concurrent writers (a process's stdout and
// stderr, an HTTP tee) write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
