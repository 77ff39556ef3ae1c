package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests are about what mcpbox says in daily use: one startup
// summary instead of a line per pinned tool, a warning for a server whose
// tools are all hidden, pin --check over a broken server, and the advice
// an unprivileged user without cgroups gets.

// noiseConfig writes a serve config of mcpservers: each name in withTools
// gets tools: {allow: ["*"]}, each in bare no tools: key, each in broken a
// command that does not exist. It returns the config's path.
func noiseConfig(t *testing.T, m mode, withTools, bare, broken []string) string {
	t.Helper()
	bin := goBuild(t, gwServerPkg)
	dir := gwDir(t, m)
	srv := map[string]any{}
	add := func(name string, tools bool, command []string) {
		s := map[string]any{
			"command":    command,
			"filesystem": map[string]any{"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}}},
		}
		if tools {
			s["tools"] = map[string]any{"allow": []string{"*"}}
		}
		srv[name] = s
	}
	for _, n := range withTools {
		add(n, true, []string{"/opt/bin/mcpserver", "-name", n})
	}
	for _, n := range bare {
		add(n, false, []string{"/opt/bin/mcpserver", "-name", n})
	}
	for _, n := range broken {
		add(n, true, []string{"/opt/bin/no-such-server"})
	}
	cfg := map[string]any{"version": 1, "state_dir": filepath.Join(dir, "state"), "servers": srv}
	if !m.root() {
		cfg["sandbox"] = map[string]any{"require": []string{"userns", "mountns", "pidns", "netns", "seccomp", "landlock", "idmap"}}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gateway.yaml")
	m.writeFile(t, path, string(b), 0o644)
	return path
}

// linesMatching returns the lines of s that match re.
func linesMatching(s string, re *regexp.Regexp) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// TestServeStartupSummary: serve announces a server without tools: as a
// warning with the line to add, prints one summary line, and pins a
// server's tools on first use in one line, not one per tool; the next
// start's summary counts the pins from the lock file.
func TestServeStartupSummary(t *testing.T) {
	m := modes(t)[0]
	cfg := noiseConfig(t, m, []string{"alpha"}, []string{"beta"}, nil)
	g := gwServe(t, m, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
	names := gwToolNames(t, ctx, sess)
	exposed := 0
	for n := range names {
		switch {
		case strings.HasPrefix(n, "beta__"):
			t.Errorf("server beta has no tools: key, yet exposes %s", n)
		case strings.HasPrefix(n, "alpha__"):
			exposed++
		}
	}
	if exposed == 0 {
		t.Fatalf("alpha exposes no tool: %v", names)
	}
	firstUse := regexp.MustCompile(`msg="definitions pinned on first use" server=(alpha|beta) kind=tool count=([0-9]+)`)
	deadline := time.Now().Add(20 * time.Second)
	for len(linesMatching(g.logs.String(), firstUse)) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	logs := g.logs.String()

	warn := linesMatching(logs, regexp.MustCompile(`^mcpbox: .*: warning: servers\.beta: no tools: key, so every tool is hidden \(default deny\); add  tools: \{allow: \["\*"\]\}  to expose them$`))
	if len(warn) != 1 || !strings.HasPrefix(warn[0], "mcpbox: "+cfg+":") {
		t.Errorf("want one default-deny warning for beta naming %s, got %q\n%s", cfg, warn, logs)
	}
	summary := linesMatching(logs, regexp.MustCompile(`^mcpbox: .*: 2 servers: `))
	if len(summary) != 1 || !strings.Contains(summary[0], "alpha (tools not yet pinned)") || !strings.HasSuffix(summary[0], "; 1 warning above") {
		t.Errorf("want one summary line, got %q\n%s", summary, logs)
	}
	if n := len(linesMatching(logs, regexp.MustCompile(`tool definition pinned`))); n != 0 {
		t.Errorf("%d lines for single pinned definitions at the default log level, want 0:\n%s", n, logs)
	}
	pinned := linesMatching(logs, firstUse)
	counts := map[string]int{}
	for _, l := range pinned {
		sm := firstUse.FindStringSubmatch(l)
		n, _ := strconv.Atoi(sm[2])
		counts[sm[1]] += n
	}
	if len(pinned) != 2 || counts["alpha"] != exposed || counts["beta"] != exposed {
		t.Errorf("first-use pin lines %q: want one per server, each counting the %d tools", pinned, exposed)
	}
	// Startup and the first listing of 2 servers say three lines about
	// pins (the summary, one per server), not one per tool. (Other lines,
	// such as leftovers of other runs removed at startup, are not counted.)
	if lines := linesMatching(logs, regexp.MustCompile(`pinned|definition`)); len(lines) != 3 {
		t.Errorf("%d lines about pins for 2 servers of %d tools, want 3:\n%s", len(lines), exposed, strings.Join(lines, "\n"))
	}
	gwClose(t, sess)
	g.stop(t)

	g2 := gwServe(t, m, cfg)
	want := fmt.Sprintf("alpha (%d tools pinned), beta (%d tools pinned); 1 warning above", exposed, exposed)
	if s := linesMatching(g2.logs.String(), regexp.MustCompile(`^mcpbox: .*: 2 servers: `)); len(s) != 1 || !strings.HasSuffix(s[0], want) {
		t.Errorf("restart summary %q, want one line ending %q", s, want)
	}
}

// TestPinCheckReportsEveryServer: a server that cannot start does not
// stop pin --check (or pin) from reporting the others; the exit status
// says something was not checked, and a server the lock lacks is "not yet
// pinned" rather than a diff of every definition against nothing.
func TestPinCheckReportsEveryServer(t *testing.T) {
	m := modes(t)[0]
	cfg := noiseConfig(t, m, []string{"alpha", "gamma"}, nil, []string{"broken"})
	pin := func(args ...string) result {
		return m.mcpbox(t, 3*time.Minute, "", append([]string{"pin", "--config", cfg}, args...)...)
	}
	r := pin("--check")
	notYet := regexp.MustCompile(`(?m)^not yet pinned: ([0-9]+) tools of (alpha|gamma) \(mcpbox pin (alpha|gamma) records them\)$`)
	got := map[string]bool{}
	for _, sm := range notYet.FindAllStringSubmatch(r.stdout, -1) {
		got[sm[2]] = sm[2] == sm[3] && sm[1] != "0"
	}
	if r.code != 1 || !got["alpha"] || !got["gamma"] || !strings.Contains(r.stderr, "server broken could not start") ||
		!strings.Contains(r.stderr, "not checked: broken") || strings.Contains(r.stdout, "absent") || strings.Contains(r.stdout, "quarantined") {
		t.Fatalf("pin --check with a broken server: want exit 1, alpha and gamma not yet pinned, broken named:\n%s", r)
	}
	r = pin()
	if r.code != 1 || !strings.Contains(r.stdout, "pinned alpha: ") || !strings.Contains(r.stdout, "pinned gamma: ") ||
		!strings.Contains(r.stderr, "not pinned: broken") {
		t.Fatalf("pin with a broken server: want the others pinned and exit 1:\n%s", r)
	}
	r = pin("--check")
	if r.code != 1 || !strings.Contains(r.stdout, "lock file: every definition matches") || notYet.MatchString(r.stdout) ||
		!strings.Contains(r.stderr, "not checked: broken") {
		t.Fatalf("pin --check after pin: want the pinned servers matching and exit 1 for broken:\n%s", r)
	}
	if r = pin("--check", "alpha", "gamma"); r.code != 0 {
		t.Fatalf("pin --check of the servers that start: want exit 0:\n%s", r)
	}
}

// TestServeCgroupsAdvice: as an unprivileged user with no cgroup of its
// own, serve of the embedded default stops before it creates anything,
// with two lines: what doctor found, and the two ways out. Each way out
// then works: --allow-degraded=cgroups, and a delegated cgroup.
func TestServeCgroupsAdvice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching to the unprivileged user needs root")
	}
	m := mode{name: "unprivileged", uid: nobody}
	project, home := m.dir(t), m.dir(t)
	serve := func(args ...string) result {
		t.Helper()
		return serveAs(t, m, nil, project, home, args...)
	}
	// Whether this user has cgroups is doctor's answer, and what the
	// advice must report.
	d := m.mcpbox(t, 60*time.Second, "", "doctor", "--json")
	type check struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	}
	var cgroups check
	for _, l := range strings.Split(d.stdout, "\n") {
		var c check
		if json.Unmarshal([]byte(l), &c) == nil && c.Name == "cgroups" {
			cgroups = c
		}
	}
	switch {
	case cgroups.Name != "cgroups":
		t.Fatalf("doctor --json has no cgroups check:\n%s", d)
	case cgroups.OK:
		t.Skip("doctor: this host gives the unprivileged user cgroups, so there is no advice to test")
	}
	r := serve("serve", "--stdio")
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if r.code != 1 || len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "mcpbox: serve: server workspace needs cgroups for its resource limits, and doctor found no usable cgroups: ") ||
		!strings.Contains(lines[1], "systemd-run --user --scope -p Delegate=yes mcpbox serve --stdio,") ||
		!strings.Contains(lines[1], "mcpbox serve --stdio --allow-degraded=cgroups") ||
		strings.Contains(r.stderr, "mkdir") {
		t.Fatalf("serve as a user without cgroups (doctor: %s): want exit 1 and the two-line advice:\n%s", cgroups.Detail, r)
	}
	if _, err := os.Stat(filepath.Join(home, ".local")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("serve refused but created its state dir under %s: %v", home, err)
	}

	r = serve("serve", "--stdio", "--allow-degraded=cgroups")
	if r.code != 0 || !strings.Contains(r.stderr, "1 server: workspace") || strings.Contains(r.stderr, "needs cgroups") {
		t.Fatalf("serve --allow-degraded=cgroups: want it to serve (exit 0 at the end of stdin):\n%s", r)
	}

	t.Run("delegated", func(t *testing.T) {
		dirs := delegateV1(t, nobody)
		r := serveAs(t, m, dirs, project, home, "serve", "--stdio")
		if r.code != 0 || strings.Contains(r.stderr, "needs cgroups") {
			t.Fatalf("serve in a delegated cgroup: want it to serve:\n%s", r)
		}
	})
}

// serveAs runs mcpbox ARGS as m's user in dir with HOME=home and no
// standard input, inside the cgroups dirs if any (as inCgroups does).
func serveAs(t *testing.T, m mode, dirs []string, dir, home string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	goR, goW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer goW.Close()
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `read x <&3 && exec 3<&- && exec "$@"`, "sh", mcpboxBin}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8"}
	cmd.Dir = dir
	cmd.ExtraFiles = []*os.File{goR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(m.uid), Gid: uint32(m.uid), Groups: []uint32{}}}
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	goR.Close()
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("moving the test shell into %s: %v", d, err)
		}
	}
	fmt.Fprintln(goW, "go")
	err = cmd.Wait()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("mcpbox %v did not finish in 60 s:\n%s", args, r)
	}
	return r
}
