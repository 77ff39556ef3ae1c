//go:build linux

package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCommandPolicy(t *testing.T) {
	base := CommandPolicy{
		Allow:   []string{"ls", "git status", "echo *"},
		Deny:    []string{"rm", "git push*"},
		Approve: []string{"git commit*"},
	}
	tests := []struct {
		name     string
		policy   CommandPolicy
		argv     []string
		want     verdict
		wantRule string
	}{
		{"allow by base name", base, []string{"ls", "-la"}, allowed, "ls"},
		{"allow by base of path", base, []string{"/bin/ls"}, allowed, "ls"},
		{"allow by line", base, []string{"git", "status"}, allowed, "git status"},
		{"star crosses slash in a line", base, []string{"echo", "a/b"}, allowed, "echo *"},
		{"star within a word", base, []string{"echo", "hi"}, allowed, "echo *"},
		{"no rule", base, []string{"git", "log"}, refused, ""},
		{"deny by base", base, []string{"/usr/bin/rm", "-rf", "x"}, refused, "rm"},
		{"deny by line", base, []string{"git", "push", "origin"}, refused, "git push*"},
		{"approve", base, []string{"git", "commit", "-m", "x"}, needsReview, "git commit*"},
		{"deny beats approve", CommandPolicy{Allow: []string{"*"}, Deny: []string{"git*"}, Approve: []string{"git commit*"}},
			[]string{"git", "commit"}, refused, "git*"},
		{"approve beats allow", CommandPolicy{Allow: []string{"*"}, Approve: []string{"curl"}}, []string{"curl"}, needsReview, "curl"},
		{"empty allow", CommandPolicy{}, []string{"ls"}, refused, ""},
		{"bad deny fails closed", CommandPolicy{Allow: []string{"ls"}, Deny: []string{"["}}, []string{"ls"}, refused, "["},
		{"bad allow matches nothing", CommandPolicy{Allow: []string{"["}}, []string{"["}, refused, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.policy.check(tt.argv, t.TempDir())
			v, rule := d.v, d.rule
			if v != tt.want || rule != tt.wantRule {
				t.Errorf("check(%q) = %v, %q; want %v, %q", tt.argv, v, rule, tt.want, tt.wantRule)
			}
		})
	}
}

func TestRunCommand(t *testing.T) {
	w := newWorkspace(t, Options{
		Commands: CommandPolicy{
			Allow:   []string{"ls", "sh", "seq", "pwd", "no-such-program-xyz"},
			Deny:    []string{"rm"},
			Approve: []string{"touch"},
		},
		CommandTimeout: 2 * time.Second,
		OutputCap:      1000,
	})
	writeHost(t, filepath.Join(w.in, "hello.txt"), "hi\n")
	writeHost(t, filepath.Join(w.out, "sub", "x"), "")
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"ls input", map[string]any{"argv": []string{"ls"}, "cwd": "input"}, "exit code 0\nhello.txt\n"},
		{"default cwd is output", map[string]any{"argv": []string{"ls"}}, "exit code 0\nsub\n"},
		{"cwd subdir", map[string]any{"argv": []string{"pwd"}, "cwd": "/workspace/output/sub"}, "exit code 0\n" + filepath.Join(w.out, "sub") + "\n"},
		{"no shell expansion", map[string]any{"argv": []string{"ls", "*.txt"}, "cwd": "input"}, "exit code 2\n"},
		{"stderr kept in order", map[string]any{"argv": []string{"sh", "-c", "echo a; echo b >&2; echo c"}}, "exit code 0\na\nb\nc\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := w.call(t, "run_command", tt.args)
			if tt.name == "no shell expansion" {
				got, _, _ = strings.Cut(got, "ls:") // ls's wording varies
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("exit code", func(t *testing.T) {
		got, isErr := w.call(t, "run_command", map[string]any{"argv": []string{"sh", "-c", "echo out; exit 3"}})
		if got != "exit code 3\nout\n" || !isErr {
			t.Errorf("got %q (error %v), want exit code 3 as an error result", got, isErr)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		w.mustFail(t, "run_command", map[string]any{"argv": []string{"rm", "-rf", "/"}}, `matches deny rule "rm"`)
		w.mustFail(t, "run_command", map[string]any{"argv": []string{"touch", "x"}},
			`matches approve rule "touch": it needs human approval, which is not available in this build: refused`)
		w.mustFail(t, "run_command", map[string]any{"argv": []string{"cat", "/etc/passwd"}}, "no allow rule matches")
		w.mustFail(t, "run_command", map[string]any{"argv": []string{}}, "argv is empty")
		w.mustFail(t, "run_command", map[string]any{"argv": []string{"no-such-program-xyz"}}, `program "no-such-program-xyz" not found`)
		if _, err := os.Stat(filepath.Join(w.out, "x")); err == nil {
			t.Error("the approve-refused command ran")
		}
	})
	t.Run("output cap", func(t *testing.T) {
		var full strings.Builder
		for i := 1; i <= 2000; i++ {
			fmt.Fprintf(&full, "%d\n", i)
		}
		got, _ := w.call(t, "run_command", map[string]any{"argv": []string{"seq", "2000"}})
		want := "exit code 0\n" + full.String()[:1000] +
			fmt.Sprintf("\n[output truncated: %d more bytes dropped]\n", full.Len()-1000)
		if got != want {
			t.Errorf("got %q...\nwant %q...", got[max(0, len(got)-80):], want[len(want)-80:])
		}
	})
	t.Run("timeout kills the process group", func(t *testing.T) {
		start := time.Now()
		// timeout_seconds above the server limit is capped to it (2s).
		got, isErr := w.call(t, "run_command", map[string]any{
			"argv": []string{"sh", "-c", "sleep 300 & echo $!; wait"}, "timeout_seconds": 1 << 62})
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("took %v, limit is 2s", el)
		}
		if !isErr || !strings.HasPrefix(got, "timed out after 2s; process group killed\n") {
			t.Fatalf("got %q, want a timeout", got)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(got, "\n", 3)[1]))
		if err != nil {
			t.Fatalf("no child pid in %q", got)
		}
		waitGone(t, pid)
	})
	t.Run("exited command's background child killed", func(t *testing.T) {
		// The command exits at once; Wait reaps it, and the kill of its
		// group that follows (by a pidfd of the reaped leader) must still
		// reach the child it left running.
		got, _ := w.call(t, "run_command", map[string]any{
			"argv": []string{"sh", "-c", "sleep 300 </dev/null >/dev/null 2>&1 & echo $!"}})
		if !strings.HasPrefix(got, "exit code 0\n") {
			t.Fatalf("got %q", got)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(got, "\n", 3)[1]))
		if err != nil {
			t.Fatalf("no child pid in %q", got)
		}
		waitGone(t, pid)
	})
	t.Run("shorter timeout", func(t *testing.T) {
		start := time.Now()
		got, _ := w.call(t, "run_command", map[string]any{"argv": []string{"sh", "-c", "exec sleep 30"}, "timeout_seconds": 1})
		if !strings.HasPrefix(got, "timed out after 1s") || time.Since(start) > 8*time.Second {
			t.Errorf("got %q after %v", got, time.Since(start))
		}
	})
}

// waitGone waits until pid no longer runs (gone, or a zombie not yet
// reaped by its new parent).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if _, after, ok := strings.Cut(string(stat), ") "); ok && strings.HasPrefix(after, "Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs: %s", pid, stat)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
