package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/procgroup"
)

type runArgs struct {
	Argv           []string `json:"argv" jsonschema:"program and arguments, run directly without a shell"`
	Cwd            string   `json:"cwd,omitempty" jsonschema:"working directory, input/... or output/... (default: output, or input if there is no output)"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds (capped by the server's limit)"`
}

func (s *server) addCommandTools(srv *mcp.Server) {
	cmdNote := fmt.Sprintf(" No shell: argv[0] is the program, pipes and globs are not expanded. "+
		"A command policy decides what may run. Combined stdout+stderr is kept up to %d bytes.", s.o.OutputCap)
	mcp.AddTool(srv, &mcp.Tool{
		Name: "run_command",
		Description: fmt.Sprintf("Run a command to completion and return its exit code and output. "+
			"Times out after %s at most; its process group is killed (a process that leaves the group, e.g. with setsid, lives until the sandbox ends).", s.o.CommandTimeout) + cmdNote,
		Annotations: mutating("Run command", false),
		InputSchema: argvSchema[runArgs](),
	}, s.runCommand)
	mcp.AddTool(srv, &mcp.Tool{
		Name: "start_job",
		Description: fmt.Sprintf("Start a command in the background and return its job id. At most %d jobs run "+
			"at once; a job's process group is killed after %s and when this server stops. Jobs belong to this server, "+
			"not to a client session: every client session that shares it sees the same jobs and can read or stop them, "+
			"and a job outlives the session that started it.", s.o.MaxJobs, s.o.JobLifetime) + cmdNote,
		Annotations: mutating("Start job", false),
		InputSchema: argvSchema[startArgs](),
	}, s.startJob)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "job_status",
		Description: "Report whether a job is running, how it ended, and how much output it has.",
		Annotations: readOnly("Job status"),
	}, s.jobStatus)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "job_output",
		Description: "Return a job's combined output from offset (default 0) and the offset to continue from.",
		Annotations: readOnly("Job output"),
	}, s.jobOutput)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "stop_job",
		Description: "Kill a job and its child processes.",
		Annotations: mutating("Stop job", true),
	}, s.stopJob)
}

// argvSchema is T's inferred input schema with its argv an array:
// inferred from a Go slice it would allow null too, which the tool
// refuses, so a client that trusts the schema would send what fails. (An
// empty array passes the schema, for the tool's own "argv is empty".)
func argvSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err) // T is ours: a test catches it
	}
	argv := s.Properties["argv"]
	argv.Type, argv.Types = "array", nil
	return s
}

// prepare checks argv against the policy and builds the command, in its
// own process group, with cwd resolved beneath a root. Call release once
// the command has started (or will not): it holds the working directory
// open, so the child enters the directory that was checked, not whatever
// the path names by then.
func (s *server) prepare(argv []string, cwd string) (cmd *exec.Cmd, release func(), err error) {
	cmd, release, err = s.prepareCmd(argv, cwd)
	if err != nil {
		return nil, func() {}, err
	}
	return cmd, release, nil
}

func (s *server) prepareCmd(argv []string, cwd string) (*exec.Cmd, func(), error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, nil, errors.New("argv is empty")
	}
	if len(argv) > 4096 {
		return nil, nil, errors.New("too many arguments (max 4096)")
	}
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return nil, nil, errors.New("argument contains a NUL byte")
		}
	}
	dir, release, err := s.workdir(cwd)
	if err != nil {
		return nil, nil, err
	}
	d := s.o.Commands.check(argv, dir)
	if err := s.o.Commands.policyError(argv, d); err != nil {
		release()
		return nil, nil, err
	}
	if d.prog.path == "" {
		release()
		return nil, nil, fmt.Errorf("program %q not found", argv[0])
	}
	// The file the policy resolved is what runs, not a fresh PATH lookup.
	cmd := &exec.Cmd{Path: d.prog.path, Args: argv, Dir: dir}
	cmd.WaitDelay = time.Second // a straggler holding the pipe does not hold us
	setProcGroup(cmd)
	return cmd, release, nil
}

// workdir resolves cwd to a directory beneath a root, opened: the child
// changes into /proc/self/fd/N of that descriptor, so a rename racing the
// check cannot swap in a symlink to elsewhere. release closes it.
func (s *server) workdir(cwd string) (dir string, release func(), err error) {
	if cwd == "" {
		cwd = "output"
		if s.o.Output == "" {
			cwd = "input"
		}
	}
	p, err := s.resolve(cwd)
	if err != nil {
		return "", nil, err
	}
	p.rel = path.Clean(p.rel)
	if p.rel == ".." || strings.HasPrefix(p.rel, "../") {
		return "", nil, fmt.Errorf("cwd %s: refused: leaves its root", cwd)
	}
	d, err := openDir(p)
	if err != nil {
		return "", nil, err
	}
	return d.procPath(), d.close, nil
}

// startError keeps host paths (the cwd) out of a start failure.
func startError(argv0 string, err error) error {
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("program %q not found", argv0)
	}
	var perr *fs.PathError
	if errors.As(err, &perr) {
		return fmt.Errorf("starting %q: %v", argv0, perr.Err)
	}
	return fmt.Errorf("starting %q: %v", argv0, err)
}

func (s *server) runCommand(ctx context.Context, _ *mcp.CallToolRequest, in runArgs) (*mcp.CallToolResult, any, error) {
	timeout := s.o.CommandTimeout
	if in.TimeoutSeconds < 0 {
		return nil, nil, errors.New("timeout_seconds is negative")
	}
	// Compared in seconds first, so a huge value cannot overflow.
	if n := time.Duration(in.TimeoutSeconds); n > 0 && n <= timeout/time.Second {
		timeout = n * time.Second
	}
	cmd, release, err := s.prepare(in.Argv, in.Cwd)
	if err != nil {
		return policyResult(err)
	}
	out := newCapBuf(s.o.OutputCap)
	cmd.Stdout, cmd.Stderr = out, out
	g, err := startGroup(cmd)
	release()
	if err != nil {
		return nil, nil, startError(in.Argv[0], err)
	}
	defer g.Close()
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var status string
	select {
	case <-waited:
	case <-tctx.Done():
		killGroup(g, cmd.Process)
		<-waited
		status = fmt.Sprintf("timed out after %s; process group killed\n", timeout)
		if ctx.Err() != nil {
			status = "cancelled; process group killed\n"
		}
	}
	killGroup(g, cmd.Process) // background children left by the command
	ps := cmd.ProcessState
	if status == "" {
		status = exitStatus(ps.ExitCode(), ps.String()) + "\n"
	}
	res := text(status + out.String())
	res.IsError = status != "exit code 0\n"
	return res, nil, nil
}

// PolicyMeta is the key of a tool result's _meta under which the server
// marks a call its command policy refused: {"decision":"deny","rule":...}.
// mcpbox's guard audits such a call as a policy denial; it reads the
// marker from the built-in server only.
const PolicyMeta = "mcpbox/policy"

// policyResult is the answer to a command that could not run: for a policy
// refusal an error result marked with PolicyMeta, else err itself (an
// error result without the marker).
func policyResult(err error) (*mcp.CallToolResult, any, error) {
	var r *RefusalError
	if !errors.As(err, &r) {
		return nil, nil, err
	}
	res := text(r.Error())
	res.IsError = true
	res.Meta = mcp.Meta{PolicyMeta: map[string]string{"decision": "deny", "rule": r.Rule}}
	return res, nil, nil
}

// exitStatus phrases how a process ended; ExitCode is -1 for a signal.
func exitStatus(code int, desc string) string {
	if code >= 0 {
		return fmt.Sprintf("exit code %d", code)
	}
	return "terminated: " + desc
}

// capBuf keeps the first max bytes written and counts the rest. Commands
// write stdout and stderr into the same capBuf, so their order is kept.
type capBuf struct {
	max     int
	mu      sync.Mutex
	buf     []byte // guarded by mu
	dropped int64  // guarded by mu
}

func newCapBuf(max int) *capBuf { return &capBuf{max: max} }

func (c *capBuf) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - len(c.buf)
	if room >= len(p) {
		c.buf = append(c.buf, p...)
	} else {
		c.buf = append(c.buf, p[:max(room, 0)]...)
		c.dropped += int64(len(p) - max(room, 0))
	}
	return len(p), nil
}

// from returns the kept bytes from offset on, the kept size and the
// dropped count.
func (c *capBuf) from(offset int) ([]byte, int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	offset = min(max(offset, 0), len(c.buf))
	return append([]byte(nil), c.buf[offset:]...), len(c.buf), c.dropped
}

// String is the kept output as text, with a note if some was dropped.
func (c *capBuf) String() string {
	b, _, dropped := c.from(0)
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if dropped > 0 {
		s += fmt.Sprintf("\n[output truncated: %d more bytes dropped]\n", dropped)
	}
	return s
}

// startGroup starts cmd, which setProcGroup made a group leader, and holds
// its group by a pidfd of the leader: the kills after Wait (background
// children left behind) then reach this group only, never one that
// another program leads under the same number once the leader is reaped.
func startGroup(cmd *exec.Cmd) (*procgroup.Group, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return procgroup.OpenStarted(cmd)
}

// killGroup kills the process group g, and its leader p in case it left
// the group (by pidfd: harmless once reaped). A child that started its
// own session escapes; the sandbox's pid namespace still ends it.
func killGroup(g *procgroup.Group, p *os.Process) {
	_ = g.Kill()
	_ = p.Kill()
}
