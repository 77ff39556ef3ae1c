package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCheckInitFile(t *testing.T) {
	const owner = 1000
	for _, c := range []struct {
		name string
		mode uint32
		uid  uint32
		ok   bool
	}{
		{"root's", unix.S_IFREG | 0o755, 0, true},
		{"mcpbox owner's", unix.S_IFREG | 0o700, owner, true},
		{"someone else's", unix.S_IFREG | 0o755, 1001, false},
		{"group-writable", unix.S_IFREG | 0o775, 0, false},
		{"world-writable", unix.S_IFREG | 0o757, 0, false},
		{"not executable", unix.S_IFREG | 0o644, 0, false},
		{"a directory", unix.S_IFDIR | 0o755, 0, false},
	} {
		st := unix.Stat_t{Mode: c.mode, Uid: c.uid}
		if err := checkInitFile(&st, owner); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}

func TestSameBuild(t *testing.T) {
	build := func(version, rev, modified, tags string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "mcpbox", Version: version}}
		for k, v := range map[string]string{"vcs.revision": rev, "vcs.modified": modified, "-tags": tags} {
			if v != "" {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: k, Value: v})
			}
		}
		return bi
	}
	other := build("(devel)", "abc", "false", "")
	other.GoVersion = "go1.25.0"
	for _, c := range []struct {
		name string
		a, b *debug.BuildInfo
		want bool
	}{
		{"same clean revision", build("(devel)", "abc", "false", ""), build("(devel)", "abc", "false", ""), true},
		{"same release", build("v1.2.0", "", "", ""), build("v1.2.0", "", "", ""), true},
		{"other revision", build("(devel)", "abc", "false", ""), build("(devel)", "abd", "false", ""), false},
		{"modified tree", build("(devel)", "abc", "true", ""), build("(devel)", "abc", "true", ""), false},
		{"nothing identifies it", build("(devel)", "", "", ""), build("(devel)", "", "", ""), false},
		{"other release", build("v1.2.0", "", "", ""), build("v1.1.0", "", "", ""), false},
		{"other tags", build("(devel)", "abc", "false", "x"), build("(devel)", "abc", "false", ""), false},
		{"other Go", build("(devel)", "abc", "false", ""), other, false},
	} {
		if got := sameBuild(c.a, c.b); got != c.want {
			t.Errorf("%s: sameBuild = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLeanInit runs a sandbox whose init is a separate binary (a copy of
// this test binary, which is a sandbox init as mcpbox-init is) and checks
// that it is that binary running, and that the workload's walls are up:
// seccomp, no_new_privs, no capabilities, Landlock (a write to /etc).
// A binary refused by the checks is never opened for use.
func TestLeanInit(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	lean := filepath.Join(dir, InitName)
	if err := copyFile("/proc/self/exe", lean); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openLeanInit(lean, self, func(*debug.BuildInfo) bool { return false }); err == nil {
		t.Fatal("openLeanInit accepted a binary of another build")
	}
	if err := os.Chmod(lean, 0o775); err != nil {
		t.Fatal(err)
	}
	if _, err := openLeanInit(lean, self, func(*debug.BuildInfo) bool { return true }); err == nil {
		t.Fatal("openLeanInit accepted a group-writable binary")
	}
	if err := os.Chmod(lean, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := openLeanInit(lean, self, func(*debug.BuildInfo) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	// The file is replaced after the check: the descriptor still runs the
	// checked one.
	if err := os.Rename(lean, lean+".checked"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lean, []byte("#!/bin/sh\nexit 99\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := initPath
	initPath = func() string { return p }
	t.Cleanup(func() { initPath = old })

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out syncBuffer
	script := "grep -E '^(Seccomp|NoNewPrivs|CapEff|CapBnd):' /proc/self/status; echo x > /etc/x 2>/dev/null && echo WROTE; cat >/dev/null"
	sb, err := Start(context.Background(), quick("sh", "-c", script), Stdio{Stdin: r, Stdout: &out})
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(sb.cmd.Process.Pid) + "/exe")
	comm, _ := os.ReadFile("/proc/" + strconv.Itoa(sb.cmd.Process.Pid) + "/comm")
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(sb.cmd.Process.Pid) + "/cmdline")
	w.Close()
	res, err := sb.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("sandbox: %v %+v, output %q", err, res, out.String())
	}
	if exe != lean+".checked" {
		t.Errorf("the init runs %q, want the lean init %s", exe, lean+".checked")
	}
	if strings.TrimSpace(string(comm)) != "mcpbox-init" {
		t.Errorf("the init is named %q, want mcpbox-init", comm)
	}
	if args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"); len(args) != 3 || args[0] != "mcpbox-init" || args[2] != sb.ID {
		t.Errorf("the init's command line is %q, want mcpbox-init, the marker and the sandbox's ID %s", args, sb.ID)
	}
	got := out.String()
	for _, want := range []string{"Seccomp:\t2", "NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000"} {
		if !strings.Contains(got, want) {
			t.Errorf("workload status lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "WROTE") {
		t.Errorf("the workload wrote to /etc:\n%s", got)
	}
}

// TestInitCheckNamesUnstampedMcpbox: when mcpbox itself carries no VCS
// stamp (-buildvcs=false, a git worktree) or comes from a modified tree,
// doctor's reason names mcpbox's build and how to build both, not the
// init next to it; a stamped or released mcpbox passes.
func TestInitCheckNamesUnstampedMcpbox(t *testing.T) {
	bi := func(version string, kv ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "mcpbox", Version: version}}
		for i := 0; i+1 < len(kv); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return b
	}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string // "" for identified
	}{
		{"-buildvcs=false or a worktree", bi("(devel)", "-buildvcs", "false"), "no version-control stamp"},
		{"modified tree", bi("(devel)", "vcs.revision", "abc", "vcs.modified", "true"), "modified tree"},
		{"clean revision", bi("(devel)", "vcs.revision", "abc", "vcs.modified", "false"), ""},
		{"release", bi("v1.2.0"), ""},
	} {
		err := identified(c.bi)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want identified", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "go build ./cmd/mcpbox ./cmd/mcpbox-init") {
			t.Errorf("%s: %v, want %q and the build command", c.name, err, c.want)
		}
	}
}
