//go:build linux

package builtin

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var jobPolicy = CommandPolicy{Allow: []string{"sh", "sleep"}, Deny: []string{"rm"}}

// startJob starts a job and returns its id.
func startJob(t *testing.T, cs *mcp.ClientSession, argv ...string) string {
	t.Helper()
	got, isErr := callOn(t, cs, "start_job", map[string]any{"argv": argv})
	id, ok := strings.CutPrefix(strings.TrimSpace(got), "started ")
	if isErr || !ok {
		t.Fatalf("start_job(%q) = %q", argv, got)
	}
	return id
}

// waitStatus polls job_status until it contains want.
func waitStatus(t *testing.T, cs *mcp.ClientSession, id, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, isErr := callOn(t, cs, "job_status", map[string]any{"id": id})
		if isErr {
			t.Fatalf("job_status(%s): %s", id, got)
		}
		if strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("job_status(%s) = %q, never contained %q", id, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstLinePID reads the pid a job printed as its first output line.
func firstLinePID(t *testing.T, cs *mcp.ClientSession, id string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := callOn(t, cs, "job_output", map[string]any{"id": id})
		if line, _, ok := strings.Cut(got, "\n"); ok {
			if pid, err := strconv.Atoi(line); err == nil {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s printed no pid: %q", id, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestJobLifecycle(t *testing.T) {
	w := newWorkspace(t, Options{Commands: jobPolicy, OutputCap: 64})
	id := startJob(t, w.cs, "sh", "-c", "echo hello; sleep 0.2; echo done; exit 4")
	status := waitStatus(t, w.cs, id, "finished")
	if !strings.HasPrefix(status, id+": finished: exit code 4") || !strings.Contains(status, "output: 11 bytes kept") {
		t.Errorf("status = %q", status)
	}
	got := w.mustOK(t, "job_output", map[string]any{"id": id})
	if want := "hello\ndone\n[job finished; next offset: 11]\n"; got != want {
		t.Errorf("job_output = %q, want %q", got, want)
	}
	got = w.mustOK(t, "job_output", map[string]any{"id": id, "offset": 6})
	if want := "done\n[job finished; next offset: 11]\n"; got != want {
		t.Errorf("job_output from 6 = %q, want %q", got, want)
	}

	t.Run("output cap", func(t *testing.T) {
		id := startJob(t, w.cs, "sh", "-c", "i=0; while [ $i -lt 100 ]; do echo 0123456789; i=$((i+1)); done")
		waitStatus(t, w.cs, id, "finished")
		got := w.mustOK(t, "job_output", map[string]any{"id": id})
		if want := "[job finished; next offset: 64; 1036 bytes dropped over the cap]\n"; !strings.HasSuffix(got, want) {
			t.Errorf("job_output = %q, want suffix %q", got, want)
		}
	})
	t.Run("stop kills children", func(t *testing.T) {
		id := startJob(t, w.cs, "sh", "-c", "sleep 300 & echo $!; wait")
		pid := firstLinePID(t, w.cs, id)
		got := w.mustOK(t, "stop_job", map[string]any{"id": id})
		if !strings.HasPrefix(got, id+": stopped by stop_job") {
			t.Errorf("stop_job = %q", got)
		}
		waitGone(t, pid)
		w.mustOK(t, "stop_job", map[string]any{"id": id}) // idempotent
	})
	t.Run("refusals", func(t *testing.T) {
		w.mustFail(t, "start_job", map[string]any{"argv": []string{"rm", "x"}}, `matches deny rule "rm"`)
		w.mustFail(t, "start_job", map[string]any{"argv": []string{"ls"}}, "no allow rule matches")
		w.mustFail(t, "job_status", map[string]any{"id": "job-999"}, `no job "job-999"`)
		w.mustFail(t, "job_output", map[string]any{"id": id, "offset": -1}, "negative")
	})
}

func TestJobLifetime(t *testing.T) {
	w := newWorkspace(t, Options{Commands: jobPolicy, JobLifetime: 500 * time.Millisecond})
	id := startJob(t, w.cs, "sh", "-c", "sleep 300 & echo $!; wait")
	pid := firstLinePID(t, w.cs, id)
	status := waitStatus(t, w.cs, id, "killed: ran longer than the job lifetime (500ms)")
	if !strings.HasPrefix(status, id+": killed") {
		t.Errorf("status = %q", status)
	}
	waitGone(t, pid)
}

func TestMaxJobs(t *testing.T) {
	w := newWorkspace(t, Options{Commands: jobPolicy, MaxJobs: 2})
	a := startJob(t, w.cs, "sleep", "300")
	startJob(t, w.cs, "sleep", "300")
	w.mustFail(t, "start_job", map[string]any{"argv": []string{"sleep", "300"}}, "too many jobs running (max 2)")
	w.mustOK(t, "stop_job", map[string]any{"id": a})
	startJob(t, w.cs, "sleep", "300")
}

func TestJobsEndWithSession(t *testing.T) {
	w := newWorkspace(t, Options{Commands: jobPolicy})
	other := w.connect(t)
	id := startJob(t, other, "sh", "-c", "echo $$; exec sleep 300")
	pid := firstLinePID(t, other, id)
	w.mustFail(t, "job_status", map[string]any{"id": id}, "no job")
	w.mustFail(t, "stop_job", map[string]any{"id": id}, "no job")
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

// TestGoroutinesEndWithSession checks that a session's jobs leave no
// goroutine behind once the session is closed.
func TestGoroutinesEndWithSession(t *testing.T) {
	w := newWorkspace(t, Options{Commands: jobPolicy})
	before := runtime.NumGoroutine()
	cs := w.connect(t)
	startJob(t, cs, "sleep", "300")
	startJob(t, cs, "sh", "-c", "sleep 300 & wait")
	if during := runtime.NumGoroutine(); during <= before {
		t.Fatalf("goroutines: %d before, %d with jobs running; the count tells nothing", before, during)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the session:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
