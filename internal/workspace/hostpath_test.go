//go:build linux

package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeHostDirRefusesSymlinks: a project plants a symlink as the output
// or as a dir on its way (to a dir outside, a dangling one, a relative
// one); MakeHostDir refuses it, names link and target, and makes nothing
// at the target.
func TestMakeHostDirRefusesSymlinks(t *testing.T) {
	forEachHostPath(t, testMakeHostDirRefusesSymlinks)
}

func testMakeHostDirRefusesSymlinks(t *testing.T, HostPath hostPathFunc, MakeHostDir makeHostDirFunc) {
	for _, tc := range []struct {
		name   string
		link   string // planted in the project, pointing at the victim dir
		rel    string // asked for
		target func(victim string) string
	}{
		{"output", "mcpbox-out", "mcpbox-out", func(v string) string { return v }},
		{"intermediate", "build", "build/out", func(v string) string { return v }},
		{"deep", "a/b", "a/b/c/out", func(v string) string { return v }},
		{"relative", "mcpbox-out", "mcpbox-out", func(string) string { return "../victim" }},
		{"dangling", "mcpbox-out", "mcpbox-out", func(v string) string { return filepath.Join(v, "new") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outer := t.TempDir()
			project, victim := filepath.Join(outer, "project"), filepath.Join(outer, "victim")
			for _, d := range []string{project, victim, filepath.Join(project, filepath.Dir(tc.link))} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			target := tc.target(victim)
			if err := os.Symlink(target, filepath.Join(project, tc.link)); err != nil {
				t.Fatal(err)
			}
			got, err := MakeHostDir(project, tc.rel, 0o755)
			if !errors.Is(err, ErrSymlink) {
				t.Fatalf("MakeHostDir(%s) = %q, %v; want ErrSymlink", tc.rel, got, err)
			}
			for _, s := range []string{filepath.Join(project, tc.link), target} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %s", err, s)
				}
			}
			if names, _ := os.ReadDir(victim); len(names) > 0 {
				t.Errorf("the victim dir now holds %v", names)
			}
			// HostPath (mounts, the input) refuses the same path.
			if _, err := HostPath(project, tc.rel); err == nil {
				t.Errorf("HostPath(%s) followed the symlink", tc.rel)
			}
		})
	}
}

// TestMakeHostDir: plain dirs are made (or found) and their real path is
// returned; the trusted root itself may be reached through a symlink.
func TestMakeHostDir(t *testing.T) {
	forEachHostPath(t, testMakeHostDir)
}

func testMakeHostDir(t *testing.T, HostPath hostPathFunc, MakeHostDir makeHostDirFunc) {
	outer := t.TempDir()
	real := filepath.Join(outer, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(outer, "via")); err != nil {
		t.Fatal(err)
	}
	got, err := MakeHostDir(filepath.Join(outer, "via"), "a/./b/", 0o700)
	if want := filepath.Join(real, "a", "b"); err != nil || got != want {
		t.Fatalf("MakeHostDir = %q, %v; want %q", got, err, want)
	}
	if fi, err := os.Lstat(got); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("made %v (%v), want a dir of mode 0700", fi, err)
	}
	if again, err := MakeHostDir(real, "a/b", 0o700); err != nil || again != got {
		t.Errorf("MakeHostDir of an existing dir = %q, %v; want %q", again, err, got)
	}
	if root, err := MakeHostDir(real, ".", 0o700); err != nil || root != real {
		t.Errorf("MakeHostDir(.) = %q, %v; want %q", root, err, real)
	}
	if err := os.WriteFile(filepath.Join(real, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := MakeHostDir(real, "f", 0o700); err == nil {
		t.Errorf("MakeHostDir of a file succeeded")
	}
	if p, err := HostPath(real, "f"); err != nil || p != filepath.Join(real, "f") {
		t.Errorf("HostPath of a file = %q, %v", p, err)
	}
	for _, rel := range []string{"..", "../x", "/etc"} {
		if p, err := MakeHostDir(real, rel, 0o700); !errors.Is(err, ErrUnsafeEntry) {
			t.Errorf("MakeHostDir(%s) = %q, %v; want ErrUnsafeEntry", rel, p, err)
		}
	}
}

type (
	hostPathFunc    func(trusted, rel string) (string, error)
	makeHostDirFunc func(trusted, rel string, perm os.FileMode) (string, error)
)

// forEachHostPath runs test against HostPath and MakeHostDir (openat2)
// and against hostPathNoFollow, macOS's build of them, which cannot run
// there in CI: it must refuse every case the Linux build refuses.
func forEachHostPath(t *testing.T, test func(*testing.T, hostPathFunc, makeHostDirFunc)) {
	t.Run("openat2", func(t *testing.T) { test(t, HostPath, MakeHostDir) })
	t.Run("nofollow", func(t *testing.T) {
		test(t, func(trusted, rel string) (string, error) { return hostPathNoFollow(trusted, rel, false, 0) },
			func(trusted, rel string, perm os.FileMode) (string, error) {
				return hostPathNoFollow(trusted, rel, true, perm)
			})
	})
}
