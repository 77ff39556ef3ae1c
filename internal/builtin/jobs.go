package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/procgroup"
)

type startArgs struct {
	Argv []string `json:"argv" jsonschema:"program and arguments, run directly without a shell"`
	Cwd  string   `json:"cwd,omitempty" jsonschema:"working directory, input/... or output/... (default: output, or input if there is no output)"`
}

type jobArgs struct {
	ID string `json:"id" jsonschema:"job id from start_job"`
}

type outputArgs struct {
	ID     string `json:"id" jsonschema:"job id from start_job"`
	Offset int    `json:"offset,omitempty" jsonschema:"byte offset to read from (default 0); use the returned next offset to follow"`
}

// keepFinished bounds how many finished jobs stay queryable.
const keepFinished = 64

// job is one background command. Its goroutines end when the process does.
type job struct {
	id      string
	owner   *mcp.ServerSession
	line    string
	started time.Time
	cmd     *exec.Cmd
	group   *procgroup.Group // the command's process group, held by pidfd
	out     *capBuf
	done    chan struct{} // closed once the process is reaped

	mu     sync.Mutex
	reason string           // guarded by mu: why we killed it, if we did
	state  *os.ProcessState // guarded by mu: set when done
	ended  time.Time        // guarded by mu
}

func (j *job) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// kill ends a running job's process group, recording the first reason.
func (j *job) kill(reason string) {
	if j.finished() {
		return
	}
	j.mu.Lock()
	if j.reason == "" {
		j.reason = reason
	}
	j.mu.Unlock()
	killGroup(j.group, j.cmd.Process)
}

// run reaps the job, killing it when its lifetime is up.
func (j *job) run(lifetime time.Duration) {
	waited := make(chan struct{})
	go func() { j.cmd.Wait(); close(waited) }()
	timer := time.NewTimer(lifetime)
	defer timer.Stop()
	select {
	case <-waited:
	case <-timer.C:
		j.kill(fmt.Sprintf("killed: ran longer than the job lifetime (%s)", lifetime))
		<-waited
	}
	killGroup(j.group, j.cmd.Process) // background children left by the command
	_ = j.group.Close()
	j.mu.Lock()
	j.state, j.ended = j.cmd.ProcessState, time.Now()
	j.mu.Unlock()
	close(j.done)
}

func (j *job) status() string {
	j.mu.Lock()
	reason, state, ended := j.reason, j.state, j.ended
	j.mu.Unlock()
	_, kept, dropped := j.out.from(0)
	var b strings.Builder
	switch {
	case state == nil:
		fmt.Fprintf(&b, "%s: running for %s", j.id, time.Since(j.started).Round(time.Second))
	case reason != "":
		fmt.Fprintf(&b, "%s: %s (after %s)", j.id, reason, ended.Sub(j.started).Round(time.Millisecond))
	default:
		fmt.Fprintf(&b, "%s: finished: %s (after %s)", j.id, exitStatus(state.ExitCode(), state.String()), ended.Sub(j.started).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "\ncommand: %s\noutput: %d bytes kept", j.line, kept)
	if dropped > 0 {
		fmt.Fprintf(&b, ", %d dropped over the cap", dropped)
	}
	return b.String() + "\n"
}

// jobTable holds the jobs of all sessions; a session sees only its own.
type jobTable struct {
	max      int
	lifetime time.Duration

	mu       sync.Mutex
	next     int                         // guarded by mu
	jobs     map[string]*job             // guarded by mu
	order    []string                    // guarded by mu: ids, oldest first
	watching map[*mcp.ServerSession]bool // guarded by mu
}

func newJobTable(max int, lifetime time.Duration) *jobTable {
	return &jobTable{max: max, lifetime: lifetime, jobs: map[string]*job{}, watching: map[*mcp.ServerSession]bool{}}
}

// start runs cmd as a job of ss. The first job of a session starts a
// watcher that kills the session's jobs when the session ends.
func (t *jobTable) start(ss *mcp.ServerSession, cmd *exec.Cmd, argv []string, out *capBuf) (*job, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	running := 0
	for _, j := range t.jobs {
		if !j.finished() {
			running++
		}
	}
	if running >= t.max {
		return nil, fmt.Errorf("too many jobs running (max %d); stop one first", t.max)
	}
	j := &job{owner: ss, line: strings.Join(argv, " "), cmd: cmd, out: out, done: make(chan struct{})}
	g, err := startGroup(cmd)
	if err != nil {
		return nil, startError(argv[0], err)
	}
	j.group = g
	t.next++
	j.id = fmt.Sprintf("job-%d", t.next)
	j.started = time.Now()
	t.jobs[j.id] = j
	t.order = append(t.order, j.id)
	t.evictLocked()
	if ss != nil && !t.watching[ss] {
		t.watching[ss] = true
		go func() {
			ss.Wait()
			t.dropSession(ss)
		}()
	}
	go j.run(t.lifetime)
	return j, nil
}

// evictLocked forgets the oldest finished jobs beyond keepFinished.
// Preconditions: t.mu is held.
func (t *jobTable) evictLocked() {
	finished := 0
	for _, id := range t.order {
		if t.jobs[id].finished() {
			finished++
		}
	}
	kept := t.order[:0]
	for _, id := range t.order {
		if finished > keepFinished && t.jobs[id].finished() {
			delete(t.jobs, id)
			finished--
			continue
		}
		kept = append(kept, id)
	}
	t.order = kept
}

// dropSession kills and forgets the jobs of a session that ended.
func (t *jobTable) dropSession(ss *mcp.ServerSession) {
	t.mu.Lock()
	var mine []*job
	kept := t.order[:0]
	for _, id := range t.order {
		if j := t.jobs[id]; j.owner == ss {
			mine = append(mine, j)
			delete(t.jobs, id)
			continue
		}
		kept = append(kept, id)
	}
	t.order = kept
	delete(t.watching, ss)
	t.mu.Unlock()
	for _, j := range mine {
		j.kill("killed: session ended")
	}
}

func (t *jobTable) get(ss *mcp.ServerSession, id string) (*job, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if j, ok := t.jobs[id]; ok && j.owner == ss {
		return j, nil
	}
	if len(id) > 64 {
		id = id[:64] + "..."
	}
	return nil, fmt.Errorf("no job %q in this session", id)
}

func (s *server) startJob(_ context.Context, req *mcp.CallToolRequest, in startArgs) (*mcp.CallToolResult, any, error) {
	cmd, release, err := s.prepare(in.Argv, in.Cwd)
	if err != nil {
		return policyResult(err)
	}
	defer release() // after the start below
	out := newCapBuf(s.o.OutputCap)
	cmd.Stdout, cmd.Stderr = out, out
	j, err := s.jobs.start(req.Session, cmd, in.Argv, out)
	if err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("started %s\n", j.id)), nil, nil
}

func (s *server) jobStatus(_ context.Context, req *mcp.CallToolRequest, in jobArgs) (*mcp.CallToolResult, any, error) {
	j, err := s.jobs.get(req.Session, in.ID)
	if err != nil {
		return nil, nil, err
	}
	return text(j.status()), nil, nil
}

func (s *server) jobOutput(_ context.Context, req *mcp.CallToolRequest, in outputArgs) (*mcp.CallToolResult, any, error) {
	if in.Offset < 0 {
		return nil, nil, errors.New("offset is negative")
	}
	j, err := s.jobs.get(req.Session, in.ID)
	if err != nil {
		return nil, nil, err
	}
	state := "running"
	if j.finished() { // checked before reading, so no output can follow "finished"
		state = "finished"
	}
	b, kept, dropped := j.out.from(in.Offset)
	body := strings.ToValidUTF8(string(b), "\uFFFD")
	if body != "" && !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	body += fmt.Sprintf("[job %s; next offset: %d", state, kept)
	if dropped > 0 {
		body += fmt.Sprintf("; %d bytes dropped over the cap", dropped)
	}
	return text(body + "]\n"), nil, nil
}

func (s *server) stopJob(ctx context.Context, req *mcp.CallToolRequest, in jobArgs) (*mcp.CallToolResult, any, error) {
	j, err := s.jobs.get(req.Session, in.ID)
	if err != nil {
		return nil, nil, err
	}
	j.kill("stopped by stop_job")
	select {
	case <-j.done:
	case <-time.After(5 * time.Second):
		return nil, nil, fmt.Errorf("%s: killed, but not yet reaped", j.id)
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return text(j.status()), nil, nil
}
