package e2e

import (
	"context"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputSizeLimit fills /workspace/output past --output-size two ways:
// one 2 GiB fallocate, then a flood of 1 MiB files, each below the limit.
// The first fails at once (RLIMIT_FSIZE, SIGXFSZ), the second is killed
// by the size watcher; the host holds at most the limit plus the slack of
// a few of the watcher's rounds, and mcpbox says which limit stopped it.
func TestOutputSizeLimit(t *testing.T) {
	const (
		limit = 16 << 20
		// What a shell loop of 1 MiB files writes in a few 50 ms rounds on
		// a loaded host; unchecked, the flood writes 512 MiB.
		slack = 96 << 20
	)
	forEachMode(t, func(t *testing.T, m mode) {
		out := filepath.Join(m.dir(t), "out")
		m.mkdir(t, out)
		r := m.sh(t, `fallocate -l 2G big; echo fallocate-rc=$?; i=0; while [ $i -lt 512 ]; do head -c 1048576 /dev/zero > f$i || exit 9; i=$((i+1)); done; echo flooded`,
			"--output", out, "--output-size", "16Mi")
		used := duBytes(t, out)
		t.Logf("host output holds %d MiB (limit 16 MiB): %s", used>>20, strings.TrimSpace(r.stderr))
		if !strings.Contains(r.stdout, "fallocate-rc=153") {
			t.Errorf("fallocate -l 2G was not refused with SIGXFSZ:\n%s", r)
		}
		if r.code != 137 || strings.Contains(r.stdout, "flooded") {
			t.Fatalf("the flood was not stopped (want exit 137):\n%s", r)
		}
		if !strings.Contains(r.stderr, "sandbox stopped: /workspace/output holds") || !strings.Contains(r.stderr, "size limit of 16Mi") {
			t.Fatalf("the stop does not name the dir and its limit:\n%s", r)
		}
		if used > limit+slack {
			t.Fatalf("host output holds %d bytes, over the limit %d plus slack %d", used, limit, slack)
		}
	})
}

// TestServeOutputSizeLimit: under serve, a server that writes its
// workspace output past filesystem.output.size, in files each below the
// limit, is stopped, and the audit log says why.
func TestServeOutputSizeLimit(t *testing.T) {
	const (
		limit = 1 << 20
		slack = 8 << 20 // a few rounds of the watcher at the pace of tool calls
	)
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", "      output: {size: 1Mi}\n"+wsAllow)
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		chunk := strings.Repeat("x", 400<<10)
		gwMustCall(t, sess, "note_write", map[string]any{"name": "n0", "text": chunk}, "ok")
		row := s.waitPS(t, "running")
		// The calls after the dir passed 1 MiB fail once the sandbox is
		// gone; the gateway may start a new one, whose first
		// measurement stops it again.
		for i := 1; i < 8; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, _ = gwCall(ctx, sess, "note_write", map[string]any{"name": "n" + string(rune('0'+i)), "text": chunk})
			cancel()
		}
		var rec auRecord
		var all []auRecord
		for deadline := time.Now().Add(30 * time.Second); rec == nil && time.Now().Before(deadline); {
			all = s.logs(t, "--sandbox", row.ID)
			for _, r := range all {
				if r.str("event") == "sandbox_crash" && r.str("exit_status") != "" {
					rec = r
				}
			}
			if rec == nil {
				time.Sleep(200 * time.Millisecond)
			}
		}
		if rec == nil {
			t.Fatalf("no sandbox_crash record for %s within 30 s; its records: %v", row.ID, all)
		}
		if st := rec.str("exit_status"); !strings.Contains(st, "/workspace/output holds") || !strings.Contains(st, "size limit of 1Mi") {
			t.Fatalf("the end record does not say the output outgrew its limit: %s", rec)
		}
		t.Logf("audited end: %s", rec.str("exit_status"))
		out := filepath.Join(s.state, "workspaces", auClient, auServer, "output")
		if used := duBytes(t, out); used > limit+slack {
			t.Fatalf("workspace output holds %d bytes, over the limit %d plus slack %d", used, limit, slack)
		}

		// The full output is kept: a new sandbox on it is stopped at its
		// first measurement, every time; the client hears why and what
		// to do, serve's log names the host dir.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// With one server, the session itself cannot start.
		hc := &http.Client{Transport: gwBearer{token: s.token, base: &http.Transport{}}}
		sess2, err := gwConnectErr(ctx, g.url, hc, nil, gwLegacy)
		if err == nil {
			_, err = gwCall(ctx, sess2, "note_read", map[string]any{"name": "n0"})
			gwClose(t, sess2)
		}
		if err == nil || !strings.Contains(err.Error(), "/workspace/output held") || !strings.Contains(err.Error(), "when the sandbox started") ||
			!strings.Contains(err.Error(), "filesystem.output.size is raised") {
			t.Fatalf("a call on the full workspace: %v; want why the sandbox did not start and what to do", err)
		}
		if strings.Contains(err.Error(), out) {
			t.Errorf("the client's error names the host dir %s: %v", out, err)
		}
		if logs := g.logs.String(); !strings.Contains(logs, "over its size limit") || !strings.Contains(logs, out) {
			t.Errorf("serve's log does not name the full host dir %s:\n%s", out, logs)
		}
		// Made room, and serve restarted (the stopped starts count as ends
		// of the server, which may have been given up on; a restart does
		// not wait out the give-up's 2 minutes): the sandbox starts.
		entries, err := os.ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		g.stop(t)
		g = s.serve(t)
		sess3 := s.connect(t, g, nil)
		gwMustCall(t, sess3, "note_write", map[string]any{"name": "after", "text": "room again"}, "ok")
	})
}

// duBytes is the disk usage of the tree at dir, as du counts it (blocks,
// symlinks not followed).
func duBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
