package track

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/audit"
	"mcpbox/internal/egress"
)

// TestCallJoinsFilesAndConnections: a call's record gets the files written
// under the writable dirs while it ran (new and changed, not untouched,
// never through a symlink) and the connections opened meanwhile, with the
// bytes of those that ended; an overlapping call makes both ambiguous.
func TestCallJoinsFilesAndConnections(t *testing.T) {
	out := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(text))
		return hex.EncodeToString(sum[:])
	}
	write("old.txt", "untouched")
	write("changed.txt", "before")
	s := &Sandbox{ID: "sbx_test", Workspace: "a/s", rw: []Dir{{out, "/workspace/output"}}}

	m := s.Begin()
	newSum := write("sub/new.txt", "new file")
	changedSum := write("changed.txt", "after, longer")
	if err := os.Symlink("/etc/passwd", filepath.Join(out, "link")); err != nil {
		t.Fatal(err)
	}
	opened := egress.Event{Time: time.Now(), Host: "api.example.com", Port: 443, Decision: "allow"}
	s.Opened(opened)
	ended := opened
	ended.BytesUp, ended.BytesDown, ended.Package, ended.Version = 10, 2000, "left-pad", "1.3.0"
	s.Closed(ended)
	s.Opened(egress.Event{Time: time.Now(), Host: "169.254.169.254", Port: 80, Decision: "deny"})
	var rec audit.Record
	s.Finish(m, &rec)

	wantFiles := []audit.File{
		{Path: "/workspace/output/changed.txt", Size: 13, SHA256: changedSum},
		{Path: "/workspace/output/sub/new.txt", Size: 8, SHA256: newSum},
	}
	if d := cmp.Diff(wantFiles, rec.Files); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	wantDomains := []audit.Domain{
		{Host: "api.example.com", Port: 443, Decision: "allow", BytesUp: 10, BytesDown: 2000},
		{Host: "169.254.169.254", Port: 80, Decision: "deny"},
	}
	if d := cmp.Diff(wantDomains, rec.Domains); d != "" {
		t.Errorf("domains (-want +got):\n%s", d)
	}
	if len(rec.Packages) != 1 || rec.Packages[0].Name != "left-pad" || rec.DomainsAmbiguous || rec.Sandbox != "sbx_test" {
		t.Errorf("record %+v", rec)
	}

	if rec.FilesAmbiguous {
		t.Errorf("a call alone: files ambiguous")
	}

	// Two calls at once: a connection or file of either is marked
	// ambiguous on both (a file written by one shows in the other's
	// record too: the sandbox cannot tell whose it was).
	m1 := s.Begin()
	m2 := s.Begin()
	s.Opened(egress.Event{Time: time.Now(), Host: "x.example", Port: 443, Decision: "allow"})
	write("par.txt", "one call's")
	var r1, r2 audit.Record
	s.Finish(m1, &r1)
	s.Finish(m2, &r2)
	for _, r := range []audit.Record{r1, r2} {
		if !r.DomainsAmbiguous || len(r.Domains) != 1 || !r.Domains[0].Ambiguous {
			t.Errorf("overlapping call: %+v", r)
		}
		if !r.FilesAmbiguous || len(r.Files) != 1 || !r.Files[0].Ambiguous {
			t.Errorf("overlapping call's files: %+v", r.Files)
		}
	}
	// A call after them is alone again, and sees no earlier connection.
	m3 := s.Begin()
	var r3 audit.Record
	s.Finish(m3, &r3)
	if r3.DomainsAmbiguous || len(r3.Domains) != 0 || len(r3.Files) != 0 {
		t.Errorf("a quiet call: %+v", r3)
	}
}
