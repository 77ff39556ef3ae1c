package bearer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestLoadKeepsToken(t *testing.T) {
	dir := t.TempDir()
	first, err := Token.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first, Prefix) || len(first) != len(Prefix)+26 {
		t.Errorf("token %q: want %s and 26 random characters", first, Prefix)
	}
	again, err := Token.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("second Load = %q, want the kept %q", again, first)
	}
	fi, err := os.Lstat(Token.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want a regular file 0600", fi.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("state dir holds %v, want only %s (no temporary file left)", ents, string(Token))
	}
}

func TestLoadUnderUmask(t *testing.T) {
	old := syscall.Umask(0o377)
	defer syscall.Umask(old)
	dir := t.TempDir()
	tok, err := Token.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Token.Load(dir); err != nil || again != tok {
		t.Fatalf("Load under umask 0377: %q, %v; want %q", again, err, tok)
	}
}

// TestLoadRacers: instances starting together on one state dir agree on
// one token, and none reads a half-written file.
func TestLoadRacers(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	toks := make([]string, 16)
	errs := make([]error, len(toks))
	for i := range toks {
		wg.Go(func() { toks[i], errs[i] = Token.Load(dir) })
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != toks[0] {
			t.Fatalf("racer %d: %q, %v; racer 0: %q", i, toks[i], errs[i], toks[0])
		}
	}
}

// TestLoadRefusesUnsafeFile plants what another party (or a mistake)
// could leave as the token file: each is refused by name, and left as it
// was, rather than read or silently replaced.
func TestLoadRefusesUnsafeFile(t *testing.T) {
	good := New() + "\n"
	tests := []struct {
		name  string
		plant func(t *testing.T, path, outside string)
		want  error
	}{
		{"group readable", func(t *testing.T, path, _ string) { writeMode(t, path, good, 0o640) }, ErrUnsafeFile},
		{"world readable", func(t *testing.T, path, _ string) { writeMode(t, path, good, 0o604) }, ErrUnsafeFile},
		{"symlink to a chosen token", func(t *testing.T, path, outside string) {
			writeMode(t, outside, good, 0o600)
			symlink(t, outside, path)
		}, ErrUnsafeFile},
		{"dangling symlink", func(t *testing.T, path, outside string) { symlink(t, outside, path) }, ErrUnsafeFile},
		{"fifo", func(t *testing.T, path, _ string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrUnsafeFile},
		{"directory", func(t *testing.T, path, _ string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, ErrUnsafeFile},
		{"empty", func(t *testing.T, path, _ string) { writeMode(t, path, "", 0o600) }, ErrBadToken},
		{"short", func(t *testing.T, path, _ string) { writeMode(t, path, "abc\n", 0o600) }, ErrBadToken},
		{"header injection", func(t *testing.T, path, _ string) {
			writeMode(t, path, "mcpbox_aaaaaaaaaaaaaaaa\r\nX-Evil: 1\n", 0o600)
		}, ErrBadToken},
		{"huge", func(t *testing.T, path, _ string) { writeMode(t, path, strings.Repeat("a", maxFile+1), 0o600) }, ErrBadToken},
	}
	for _, tt := range tests {
		for _, f := range []File{Token, Dashboard} {
			t.Run(string(f)+"/"+tt.name, func(t *testing.T) {
				dir := t.TempDir()
				outside := filepath.Join(t.TempDir(), "chosen")
				tt.plant(t, f.Path(dir), outside)
				before, _ := os.Lstat(f.Path(dir))
				tok, err := f.Load(dir)
				if !errors.Is(err, tt.want) {
					t.Fatalf("Load = %q, %v; want %v", tok, err, tt.want)
				}
				if !strings.Contains(err.Error(), f.Path(dir)) {
					t.Errorf("error %q does not name %s", err, f.Path(dir))
				}
				after, _ := os.Lstat(f.Path(dir))
				if !os.SameFile(before, after) || before.Mode() != after.Mode() {
					t.Errorf("the planted file was replaced or changed")
				}
				if _, err := os.Stat(outside); tt.name == "dangling symlink" && err == nil {
					t.Errorf("Load created the symlink's target %s", outside)
				}
			})
		}
	}
}

// TestFilesApart: the dashboard's secret is a file and a token of its
// own; making or rotating one leaves the other as it was.
func TestFilesApart(t *testing.T) {
	dir := t.TempDir()
	tok, err := Token.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Dashboard.Read(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dashboard secret before one was made: %v", err)
	}
	secret, err := Dashboard.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if secret == tok || Dashboard.Path(dir) == Token.Path(dir) {
		t.Fatalf("the dashboard secret is the token (%s, %s)", Dashboard.Path(dir), Token.Path(dir))
	}
	rotated, err := Dashboard.Rotate(dir)
	if err != nil || rotated == secret {
		t.Fatalf("Rotate = %q, %v", rotated, err)
	}
	if again, err := Token.Read(dir); err != nil || again != tok {
		t.Errorf("the token after the secret's rotation: %q, %v; want %q", again, err, tok)
	}
}

// TestLoadRefusesOtherOwner: a token file of another user (who could
// have chosen it, or read it) is refused even with mode 0600.
func TestLoadRefusesOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file of another user")
	}
	dir := t.TempDir()
	writeMode(t, Token.Path(dir), New()+"\n", 0o600)
	if err := os.Lchown(Token.Path(dir), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	tok, err := Token.Load(dir)
	if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("Load = %q, %v; want %v naming uid 65534", tok, err, ErrUnsafeFile)
	}
}

func TestRotate(t *testing.T) {
	dir := t.TempDir()
	old, err := Token.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Token.Rotate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok == old || !strings.HasPrefix(tok, Prefix) {
		t.Fatalf("Rotate = %q, old %q: want a new token", tok, old)
	}
	if got, err := Token.Load(dir); err != nil || got != tok {
		t.Fatalf("Load after Rotate = %q, %v; want %q", got, err, tok)
	}
	fi, _ := os.Lstat(Token.Path(dir))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("rotated file mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestRotateReplacesSymlink: rotating over a planted symlink replaces
// the link and writes nothing through it.
func TestRotateReplacesSymlink(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	writeMode(t, outside, "keep\n", 0o600)
	symlink(t, outside, Token.Path(dir))
	tok, err := Token.Rotate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep\n" {
		t.Errorf("the symlink's target now holds %q", b)
	}
	if got, err := Token.Read(dir); err != nil || got != tok {
		t.Errorf("Read = %q, %v; want %q", got, err, tok)
	}
}

func TestWatchRefresh(t *testing.T) {
	dir := t.TempDir()
	w, err := Token.Watch(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := w.Token()
	if tok, changed, err := w.Refresh(); err != nil || changed || tok != first {
		t.Fatalf("Refresh of an unchanged file = %q, %v, %v", tok, changed, err)
	}
	next, err := Token.Rotate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok, changed, err := w.Refresh(); err != nil || !changed || tok != next {
		t.Fatalf("Refresh after Rotate = %q, %v, %v; want %q, true", tok, changed, err, next)
	}
	// A file made unsafe is not taken; the last good token stays.
	if err := os.Remove(Token.Path(dir)); err != nil {
		t.Fatal(err)
	}
	writeMode(t, Token.Path(dir), New()+"\n", 0o644)
	if tok, changed, err := w.Refresh(); !errors.Is(err, ErrUnsafeFile) || changed || tok != next {
		t.Fatalf("Refresh of an unsafe file = %q, %v, %v; want %q, false, %v", tok, changed, err, next, ErrUnsafeFile)
	}
	if w.Token() != next {
		t.Fatalf("Token after a refused refresh = %q, want %q", w.Token(), next)
	}
}

func writeMode(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}
