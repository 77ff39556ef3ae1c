package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAuditDiskFullFailsClosed puts serve's state dir on a 4 MiB tmpfs
// and fills it: every call is then either answered with its record
// committed, or refused with an error naming the audit problem (none
// answered unaudited); once space is freed calls work again by
// themselves, and the chain verifies, the refused calls' records
// included.
func TestAuditDiskFullFailsClosed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", "    tools: {allow: [\"*\"]}\n")
		opts := "size=4m,mode=0700"
		if !m.root() {
			opts += fmt.Sprintf(",uid=%d,gid=%d", m.uid, m.uid)
		}
		if err := os.Mkdir(s.state, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := mountTmpfs(s.state, opts); err != nil {
			t.Skipf("mounting a tmpfs on %s: %v", s.state, err)
		}
		t.Cleanup(func() {
			if err := unmountDetach(s.state); err != nil {
				t.Errorf("unmounting %s: %v", s.state, err)
			}
		})
		g := s.serve(t)
		sess := s.connect(t, g, nil)
		answered, refused := 0, 0
		call := func(text string) bool {
			c := await(t, callAsync(sess, "echo", map[string]any{"text": text}))
			if c.err != nil {
				t.Fatalf("call %q: protocol error %v", text, c.err)
			}
			out := gwText(c.res)
			switch {
			case !c.res.IsError && out == text:
				answered++
				return true
			case c.res.IsError && (strings.Contains(out, "echo was not run: the audit log cannot be written (the disk is full)") ||
				strings.Contains(out, "the result of echo is withheld: its audit record could not be written (the disk is full)")):
				if strings.Contains(out, text) {
					t.Fatalf("refusal %q holds the withheld result", out)
				}
				refused++
				return false
			}
			t.Fatalf("call %q: isError %v %q, want its echo or a refusal naming the full disk", text, c.res.IsError, out)
			return false
		}
		if !call("before") {
			t.Fatal("call refused before the disk is full")
		}

		filler := filepath.Join(s.state, "filler")
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		for buf := make([]byte, 64<<10); ; {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v", s.state, err)
				}
				break
			}
		}
		f.Close()
		for i := range 20 {
			call(fmt.Sprintf("full %d", i))
		}
		if refused == 0 {
			t.Fatal("20 calls on a full disk were all answered")
		}
		t.Logf("disk full: %d calls answered, %d refused", answered-1, refused)

		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !call("freed") {
			if time.Now().After(deadline) {
				t.Fatal("calls still refused 30 s after space was freed")
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !call("after") {
			t.Fatal("a call was refused after the store recovered")
		}
		gwClose(t, sess)
		g.stop(t)
		// The operator's log names the file and the cause.
		if l := g.logs.String(); !strings.Contains(l, filepath.Join(s.state, "audit.db")) || !strings.Contains(l, "disk is full") {
			t.Errorf("serve's log does not name the audit database and the full disk:\n%s", l)
		}

		if r := s.cli(t, "logs", "verify", "--config", s.cfg); r.code != 0 || !strings.Contains(r.stdout, "chain intact") {
			t.Fatalf("logs verify after the disk was full:\n%s", r)
		}
		var ok, late, notRun int
		for _, r := range s.calls(t, "echo") {
			detail, _ := r["detail"].(map[string]any)
			switch {
			case r.str("outcome") == "audit_failing":
				notRun++
			case detail["audit_late"] != nil:
				late++
			case r.str("outcome") == "ok":
				ok++
			}
		}
		// Every answered call has its record, committed in time; every
		// refused one has its record too, committed late.
		if ok != answered || late+notRun != refused {
			t.Errorf("records: %d ok, %d late, %d not run; want %d ok (answered) and %d late or not run (refused)",
				ok, late, notRun, answered, refused)
		}
		var integrity int
		for _, r := range s.logs(t, "--event", "integrity") {
			if strings.Contains(r.str("error"), "could not write") {
				integrity++
			}
		}
		if integrity == 0 {
			t.Errorf("no integrity record says the audit store could not write")
		}
	})
}

// TestAuditCorruptStoreRefusesStart: serve refuses to start on an audit
// database that is not one, naming the file, and leaves it as it was.
func TestAuditCorruptStoreRefusesStart(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", "    tools: {allow: [\"*\"]}\n")
		if err := os.Mkdir(s.state, 0o700); err != nil {
			t.Fatal(err)
		}
		if !m.root() {
			if err := os.Chown(s.state, m.uid, m.uid); err != nil {
				t.Fatal(err)
			}
		}
		db := filepath.Join(s.state, "audit.db")
		garbage := strings.Repeat("not a database ", 300)
		m.writeFile(t, db, garbage, 0o600)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := m.command(ctx, "serve", "--http", "127.0.0.1:0", "--config", s.cfg)
		cmd.Env = append(cmd.Env, auTokenEnv+"="+s.token)
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("mcpbox serve did not exit within 60 s on a corrupt audit database:\n%s", out)
		}
		if err == nil || !strings.Contains(string(out), db) || !strings.Contains(string(out), "not a database") {
			t.Fatalf("mcpbox serve on a corrupt audit database: %v, want a refusal naming %s:\n%s", err, db, out)
		}
		t.Logf("serve refused to start: %s", out)
		if b, _ := os.ReadFile(db); string(b) != garbage {
			t.Errorf("serve changed the corrupt database")
		}
	})
}
