package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// workspaceTools is what the built-in workspace server offers.
var workspaceTools = []string{"edit_file", "job_output", "job_status", "list_files", "read_file",
	"run_command", "search_files", "start_job", "stop_job", "write_file"}

// defaultProject is a project directory as the tests plant it.
type defaultProject struct {
	dir      string // the project: serve's working directory
	hostDir  string // outside the project, reached by a planted symlink
	hello    string // content of hello.txt
	todo     string // content of sub/todo.md
	needle   string // a marker in sub/todo.md
	secret   string // a marker in hostDir/private.txt: must never be seen
	followed string // name of a file a job follows with tail -f
}

// newDefaultProject makes a project readable by m's user, beside a host
// dir the project links to.
func newDefaultProject(t *testing.T, m mode) defaultProject {
	t.Helper()
	outer := m.dir(t)
	p := defaultProject{
		dir:      filepath.Join(outer, "project"),
		hostDir:  filepath.Join(outer, "hostdata"),
		hello:    "hello from the host " + tsRandomHex(t) + "\n",
		needle:   "needle-" + tsRandomHex(t),
		secret:   "hostsecret-" + tsRandomHex(t),
		followed: "follow-" + tsRandomHex(t) + ".log",
	}
	p.todo = "# todo\n- find the " + p.needle + "\n"
	for _, d := range []string{p.dir, p.hostDir, filepath.Join(p.dir, "sub")} {
		m.mkdir(t, d)
	}
	m.writeFile(t, filepath.Join(p.dir, "hello.txt"), p.hello, 0o644)
	m.writeFile(t, filepath.Join(p.dir, "sub", "todo.md"), p.todo, 0o644)
	m.writeFile(t, filepath.Join(p.dir, p.followed), "", 0o644)
	// Readable by m's user: only the sandbox may keep it out.
	m.writeFile(t, filepath.Join(p.hostDir, "private.txt"), p.secret+"\n", 0o644)
	for name, target := range map[string]string{"shadow": "/etc/shadow", "hostlink": p.hostDir} {
		if err := os.Symlink(target, filepath.Join(p.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// mkdir makes a world-readable dir owned by m's user.
func (m mode) mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if !m.root() {
		if err := os.Chown(dir, m.uid, m.uid); err != nil {
			t.Fatal(err)
		}
	}
}

// defaultServeArgs is how m's user starts the default in project dir: no
// --config as root. An unprivileged user has no cgroups here, which the
// default requires, so that mode runs the printed default with cgroups
// dropped from sandbox.require, written into the project so that "." and
// "./mcpbox-out" still name the project.
func defaultServeArgs(t *testing.T, m mode, project string, args ...string) []string {
	t.Helper()
	if m.root() {
		return append([]string{"serve"}, args...)
	}
	cfg := filepath.Join(project, "mcpbox.yaml")
	m.writeFile(t, cfg, string(printDefault(t, m, project))+
		"sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n", 0o644)
	return append([]string{"serve", "--config", cfg}, args...)
}

// printDefault runs `mcpbox serve --print-config` in dir as m's user.
func printDefault(t *testing.T, m mode, dir string) []byte {
	t.Helper()
	r := defaultRun(t, m, dir, "", "serve", "--print-config")
	if r.code != 0 || r.stdout == "" {
		t.Fatalf("serve --print-config:\n%s", r)
	}
	return []byte(r.stdout)
}

// defaultRun runs mcpbox ARGS in dir as m's user with stdin, bounded.
func defaultRun(t *testing.T, m mode, dir, stdin string, args ...string) result {
	t.Helper()
	return runIn(t, m, dir, stdin, nil, args...)
}

// runIn runs mcpbox ARGS as m's user in dir ("": the test's own) with
// stdin and env added, bounded by 60 s. Every e2e helper that runs a
// short mcpbox command and wants its exit code and output uses it.
func runIn(t *testing.T, m mode, dir, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := m.command(ctx, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(cmd.Env, env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running mcpbox %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("mcpbox %v did not finish in 60 s:\n%s", args, r)
	}
	return r
}

// hostShadow returns the lines of the host's /etc/shadow, none if the test
// cannot read it.
func hostShadow(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/etc/shadow")
	if err != nil {
		t.Logf("cannot read /etc/shadow (%v): not checking for its content", err)
		return nil
	}
	return slices.DeleteFunc(strings.Split(string(b), "\n"), func(s string) bool { return len(s) < 8 })
}

// loopbackListener counts the connections made to a host loopback port.
func loopbackListener(t *testing.T) (port int, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

// pyConnect is a python3 one-liner that prints CONNECTED if it reaches
// host:port.
func pyConnect(host string, port int) []string {
	return []string{"python3", "-c", fmt.Sprintf(
		"import socket; socket.create_connection((%q, %d), timeout=5); print('CONNECTED')", host, port)}
}

func wsRun(argv ...string) tsStep {
	return tsCall("run_command", map[string]any{"argv": argv, "cwd": "input", "timeout_seconds": 30})
}

// procsWith returns the pids whose command line contains s.
func procsWith(s string) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []string
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, filepath.Base(filepath.Dir(d)))
		}
	}
	return pids
}

// defaultBannerRE is what the default prints on stderr when serving
// HTTP, stderr not being a terminal: where its token is, not the token.
var defaultBannerRE = regexp.MustCompile(`(?s)\n  URL: +(\S+)\n  Token: +in (\S+)\n.*\n  Client config \(e\.g\. \.mcp\.json, TOKEN the token in (\S+)\):\n(.*?)\n\n`)

// defaultBanner waits for the banner of g, an embedded default serving
// HTTP, and returns its URL, the token kept in the file it names, and its
// client config. The token itself must not be in serve's output.
func defaultBanner(t *testing.T, g *gwGateway) (url, token, client string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		bm := defaultBannerRE.FindStringSubmatch(g.logs.String())
		if bm != nil {
			if bm[2] != bm[3] {
				t.Errorf("the banner names two token files: %s and %s", bm[2], bm[3])
			}
			b, err := os.ReadFile(bm[2])
			if err != nil {
				t.Fatalf("the banner's token file: %v", err)
			}
			token = strings.TrimSpace(string(b))
			if !strings.HasPrefix(token, "mcpbox_") || strings.Contains(g.logs.String(), token) {
				t.Errorf("token %q: want mcpbox_..., and not in serve's output (stderr is no terminal):\n%s", token, g.logs)
			}
			return bm[1], token, bm[4]
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcpbox serve printed no banner within 30 s\n%s", g.logs)
		}
	}
}

// defaultServeHTTP starts `mcpbox serve --http 127.0.0.1:0` with no config
// in dir as root, waits for its banner and returns the serving line's URL,
// the banner's URL, the token and the client config. It stops serve with
// SIGTERM at cleanup, expecting exit code 0.
func defaultServeHTTP(t *testing.T, dir, state string) (served, url, token, client string) {
	t.Helper()
	g := gwServeIn(t, mode{name: "root", uid: -1}, dir, []string{"--state-dir", state})
	// The banner follows the serving line.
	url, token, client = defaultBanner(t, g)
	return g.url, url, token, client
}

// rewrittenServer returns the command and args of the one server of a
// rewritten client config, named mcpbox.
func rewrittenServer(t *testing.T, js string) (string, []string) {
	t.Helper()
	var c struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		t.Fatalf("the rewritten client config does not parse: %v\n%s", err, js)
	}
	s, ok := c.MCPServers["mcpbox"]
	if len(c.MCPServers) != 1 || !ok {
		t.Fatalf("the rewritten client config has servers %v, want only mcpbox", c.MCPServers)
	}
	return s.Command, s.Args
}
