package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Helpers of the workspace tests (workspace_test.go): host trees as data,
// tar archives made in the test, and the end records of sandboxes.

// wsTree is a host tree as data: relative path → "dir", "file MODE
// CONTENT" or "link TARGET".
type wsTree map[string]string

// wsRead reads root's tree without following symlinks.
func wsRead(t *testing.T, root string) wsTree {
	t.Helper()
	tree := wsTree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			tree[rel] = fmt.Sprintf("dir %v", info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			tree[rel] = "link " + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree[rel] = fmt.Sprintf("file %v %s", info.Mode(), b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", root, err)
	}
	return tree
}

// wsFiles writes files (relative path → content; a content starting with
// "->" makes a symlink) under dir, owned by the mode's user.
func wsFiles(t *testing.T, m mode, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		m.writeFile(t, p, content, 0o644)
	}
	if !m.root() {
		// Parents made above belong to root; chown the lot.
		_ = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err == nil {
				err = os.Lchown(p, m.uid, m.uid)
			}
			return err
		})
	}
}

// wsTar writes a .tar.gz of entries in order; a content starting with
// "->" makes a symlink entry, one with "=>" a hard link entry, a name
// ending in "/" a directory.
func wsTar(t *testing.T, path string, entries [][2]string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		wsTarEntry(t, tw, e[0], e[1])
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wsTarEntry writes one entry of wsTar.
func wsTarEntry(t *testing.T, tw *tar.Writer, name, content string) {
	t.Helper()
	h := &tar.Header{Name: name, Mode: 0o644, ModTime: time.Now(), Typeflag: tar.TypeReg, Size: int64(len(content))}
	if target, ok := strings.CutPrefix(content, "->"); ok {
		h = &tar.Header{Name: name, Mode: 0o777, ModTime: time.Now(), Typeflag: tar.TypeSymlink, Linkname: target}
	} else if target, ok := strings.CutPrefix(content, "=>"); ok {
		h = &tar.Header{Name: name, Mode: 0o644, ModTime: time.Now(), Typeflag: tar.TypeLink, Linkname: target}
	} else if strings.HasSuffix(name, "/") {
		h = &tar.Header{Name: name, Mode: 0o755, ModTime: time.Now(), Typeflag: tar.TypeDir}
	}
	if err := tw.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	if h.Typeflag == tar.TypeReg {
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
}

// wsAllow is the part of box's config every test here needs.
const wsAllow = "    tools: {allow: [\"*\"]}\n"

// wsCallFails calls tool and wants it to fail (a protocol error or an
// isError result); it returns the failure's text.
func wsCallFails(t *testing.T, sess *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got, err := gwCall(ctx, sess, tool, args)
	if err == nil {
		t.Fatalf("%s %v succeeded with %q, want a failure", tool, args, got)
	}
	return err.Error()
}

// wsLines wants every line of want among the lines of out.
func wsLines(t *testing.T, out string, want ...string) {
	t.Helper()
	lines := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("no line %q in:\n%s", w, out)
		}
	}
}

// wsNoLinks wants the host file path unchanged and with no other name.
func wsNoLinks(t *testing.T, path, content string) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 1 {
		t.Errorf("%s has %d names: the archive linked to it", path, st.Nlink)
	}
	if got := mustRead(t, path); got != content {
		t.Errorf("%s now holds %q", path, got)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wsTryStart connects as alice and calls whoami; it returns the failure's
// text, or whether the call worked.
func wsTryStart(t *testing.T, s *auSetup, g *gwGateway) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	hc := &http.Client{Transport: gwBearer{token: s.token, base: &http.Transport{}}}
	defer hc.CloseIdleConnections()
	sess, err := gwConnectErr(ctx, g.url, hc, nil, gwLegacy)
	if err != nil {
		return err.Error(), false
	}
	defer gwClose(t, sess)
	got, err := gwCall(ctx, sess, "whoami", nil)
	if err != nil {
		return err.Error(), false
	}
	return got, true
}

// wsAppendTar copies the .tar.gz src to dst with entries (as in wsTar)
// appended.
func wsAppendTar(t *testing.T, src, dst string, entries [][2]string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range entries {
		wsTarEntry(t, tw, e[0], e[1])
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wsNewSandbox returns the id of the running sandbox that is none of old.
func wsNewSandbox(t *testing.T, s *auSetup, old ...string) string {
	t.Helper()
	rows := s.ps(t)
	for _, r := range rows {
		if !slices.Contains(old, r.ID) && (r.State == "running" || r.State == "paused") {
			return r.ID
		}
	}
	t.Fatalf("no new sandbox in ps: %+v", rows)
	return ""
}

// wsWantArtifacts waits (up to 30 s) for the record of id's end (a
// sandbox_stop or sandbox_crash with an exit status), checks the exported
// files and the record's list of them, and returns the record.
func wsWantArtifacts(t *testing.T, s *auSetup, adir, id string, want wsTree) auRecord {
	t.Helper()
	// An admin stop has a record of its own (detail.by admin); the end of
	// the sandbox, with its exit status, is the one that lists artifacts.
	var rec auRecord
	var all []auRecord
	deadline := time.Now().Add(30 * time.Second)
	for rec == nil && time.Now().Before(deadline) {
		all = s.logs(t, "--sandbox", id)
		for _, r := range all {
			if ev := r.str("event"); (ev == "sandbox_stop" || ev == "sandbox_crash") && r.str("exit_status") != "" {
				rec = r
			}
		}
		if rec == nil {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if rec == nil {
		t.Fatalf("no end record with an exit status for %s within 30 s; its records: %v", id, all)
	}
	dst := filepath.Join(adir, auClient, auServer, id)
	got := wsTree{}
	for rel, v := range wsRead(t, dst) {
		if content, ok := strings.CutPrefix(v, "file "); ok {
			// Drop the mode: the test cares about which files and contents.
			got[rel] = content[strings.IndexByte(content, ' ')+1:]
		} else if !strings.HasPrefix(v, "dir") {
			got[rel] = v
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("artifacts of %s (-want +got):\n%s", id, d)
	}
	if fi, err := os.Stat(dst); err == nil && fi.Mode().Perm() != 0o700 {
		t.Errorf("%s has mode %v, want 0700", dst, fi.Mode().Perm())
	}
	var wantList []string
	for rel, content := range want {
		sum := sha256.Sum256([]byte(content))
		wantList = append(wantList, fmt.Sprintf("%s (%d bytes, sha256 %s)", filepath.Join(dst, rel), len(content), hex.EncodeToString(sum[:])))
	}
	var gotList []string
	if items, ok := rec["artifacts"].([]any); ok {
		for _, it := range items {
			gotList = append(gotList, fmt.Sprint(it))
		}
	}
	slices.Sort(wantList)
	slices.Sort(gotList)
	if d := cmp.Diff(wantList, gotList); d != "" {
		t.Errorf("the end record's artifacts (-want +got):\n%s\nrecord: %s", d, rec)
	}
	return rec
}

// wsWantEnd wants the end record rec to be of event.
func wsWantEnd(t *testing.T, rec auRecord, event string) {
	t.Helper()
	if got := rec.str("event"); got != event {
		t.Errorf("the sandbox's end was audited as %s, want %s: %s", got, event, rec)
	}
}

// wsRefusal checks a start refused for a bad template: the client's error
// msg names the template but none of the host paths hidden, and serve's
// log says why.
func wsRefusal(t *testing.T, g *gwGateway, msg string, hidden ...string) {
	t.Helper()
	t.Logf("the client sees: %s", msg)
	if !strings.Contains(msg, "template") {
		t.Errorf("the client's error %q does not say the template failed", msg)
	}
	for _, h := range hidden {
		if strings.Contains(msg, h) {
			t.Errorf("the client's error %q shows the host path %s", msg, h)
		}
	}
	if !g.logs.waitFor("unsafe entry", 10*time.Second) {
		t.Errorf("serve's log does not say why the template failed:\n%s", g.logs)
	}
}

// wsNoEscape wants no file named "escape" beneath dirs.
func wsNoEscape(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == "escape" {
				t.Errorf("an archive wrote %s", p)
			}
			if err != nil && p == dir {
				return fs.SkipDir
			}
			return nil
		})
	}
}
