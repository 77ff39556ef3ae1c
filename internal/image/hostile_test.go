package image

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// snapshot describes dir for the hostile tests: names, modes, link counts
// and contents; a change means a layer reached outside its tree.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	lines := tree(t, dir)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	lines = append(lines, ". "+fi.Mode().String())
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				lines = append(lines, p+" nlink="+string(rune('0'+st.Nlink)))
			}
		}
		return nil
	})
	return lines
}

func TestPullHostileLayers(t *testing.T) {
	reg := startRegistry(t, nil)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(outside, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "sub", "keep"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, outside)
	up := strings.Repeat("../", 16) // enough to leave any temp dir
	tests := []struct {
		name   string
		layers [][]entry
		// want is ErrHostile, another sentinel, or nil: refused, or
		// unpacked with the trick neutralised. check, if set, looks at
		// the tree of an accepted image.
		want  error
		check func(t *testing.T, root string)
	}{
		{name: "dotdot name", layers: [][]entry{{file("../escape", "x")}}, want: ErrHostile},
		{name: "dotdot deep name", layers: [][]entry{{file("a/b/../../../escape", "x")}}, want: ErrHostile},
		{name: "absolute name", layers: [][]entry{{file(outside+"/pwned", "x")}},
			check: exists(outside[1:] + "/pwned")},
		{name: "absolute symlink then write through it", layers: [][]entry{{symlink("link", outside), file("link/pwned", "x")}},
			want: errAny},
		{name: "relative symlink escape then write", layers: [][]entry{{symlink("link", up+outside[1:]), file("link/pwned", "x")}},
			want: errAny},
		{name: "symlink lower, write upper", layers: [][]entry{{symlink("etc", outside)}, {file("etc/pwned", "x")}},
			want: errAny},
		{name: "symlink to inside dir via absolute path", layers: [][]entry{{dir("real/"), symlink("link", "/real")}, {file("link/f", "in")}},
			check: exists("real/f")},
		{name: "dotdot symlink clamps at root", layers: [][]entry{{dir("real/"), symlink("link", up+"real")}, {file("link/f", "in")}},
			check: exists("real/f")},
		{name: "hard link to absolute outside path", layers: [][]entry{{hardlink("stolen", outside+"/secret")}}, want: errAny},
		{name: "hard link with dotdot", layers: [][]entry{{hardlink("stolen", up+outside[1:]+"/secret")}}, want: ErrHostile},
		{name: "hard link through symlink", layers: [][]entry{{symlink("link", outside), hardlink("stolen", "link/secret")}}, want: errAny},
		{name: "hard link to a directory", layers: [][]entry{{dir("d/"), hardlink("h", "d")}}, want: ErrHostile},
		{name: "device node", layers: [][]entry{{entry{name: "dev/mem", typ: tar.TypeBlock}, entry{name: "kmsg", typ: tar.TypeChar}}},
			check: absent("dev/mem", "kmsg")},
		{name: "fifo", layers: [][]entry{{entry{name: "pipe", typ: tar.TypeFifo}}}, check: absent("pipe")},
		{name: "setuid and setgid", layers: [][]entry{{entry{name: "su", body: "x", mode: 0o6755}, entry{name: "d/", typ: tar.TypeDir, mode: 0o2775}}},
			check: modes(map[string]os.FileMode{"su": 0o755, "d": os.ModeDir | 0o775})},
		{name: "whiteout of dotdot", layers: [][]entry{{dir("a/")}, {file("a/.wh...", "")}}, want: ErrHostile},
		{name: "whiteout of ../x", layers: [][]entry{{dir("a/")}, {file("a/../.wh.x", "")}}, want: ErrHostile},
		{name: "whiteout through symlink", layers: [][]entry{{symlink("link", outside)}, {file("link/.wh.secret", "")}},
			check: exists("link")},
		{name: "opaque dir through symlink", layers: [][]entry{{symlink("link", outside)}, {file("link/.wh..wh..opq", "")}},
			check: exists("link")},
		{name: "opaque dir through relative symlink", layers: [][]entry{{symlink("link", up+outside[1:])}, {dir("link/"), file("link/.wh..wh..opq", "")}},
			check: exists("link")},
		{name: "opaque root", layers: [][]entry{{file("lower", "l")}, {file(".wh..wh..opq", ""), file("upper", "u")}},
			check: all(absent("lower"), exists("upper"))},
		{name: "dir over symlink does not chmod its target", layers: [][]entry{{symlink("d", outside)}, {entry{name: "d/", typ: tar.TypeDir, mode: 0o777}}},
			check: modes(map[string]os.FileMode{"d": os.ModeDir | 0o777})},
		{name: "file over symlink replaces the link", layers: [][]entry{{symlink("s", outside+"/secret")}, {file("s", "mine")}},
			check: exists("s")},
		{name: "root replaced by symlink", layers: [][]entry{{symlink("./", outside)}}, want: ErrHostile},
		{name: "dangling symlink as parent", layers: [][]entry{{symlink("d", "/nonexistent")}, {file("d/x", "x")}}, want: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ls []v1.Layer
			for _, es := range tt.layers {
				ls = append(ls, layer(t, es...))
			}
			ref := reg.push(t, "hostile/"+strings.NewReplacer(" ", "-", "/", "-", ",", "", ".", "").Replace(tt.name)+":v1", hostImage(t, ls...))
			opts := pullOpts(t)
			img, err := Pull(context.Background(), ref, opts)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("Pull: %v, want the image with the trick neutralised", err)
			case tt.want == errAny && err == nil, tt.want != nil && tt.want != errAny && !errors.Is(err, tt.want):
				t.Fatalf("Pull: %v, want %v", err, tt.want)
			}
			if err != nil {
				t.Logf("refused: %v", err)
				storeClean(t, opts.Store, 0)
			} else if tt.check != nil {
				tt.check(t, img.Root)
			}
			if diff := cmp.Diff(before, snapshot(t, outside)); diff != "" {
				t.Fatalf("outside dir changed (-before +after):\n%s", diff)
			}
		})
	}
}

// errAny marks a case that must be refused, for whatever reason.
var errAny = errors.New("any error")

func exists(names ...string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		for _, n := range names {
			if _, err := os.Lstat(filepath.Join(root, n)); err != nil {
				t.Errorf("/%s: %v", n, err)
			}
		}
	}
}

func absent(names ...string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		for _, n := range names {
			if _, err := os.Lstat(filepath.Join(root, n)); err == nil {
				t.Errorf("/%s exists", n)
			}
		}
	}
}

func modes(want map[string]os.FileMode) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		for n, m := range want {
			fi, err := os.Lstat(filepath.Join(root, n))
			if err != nil || fi.Mode() != m {
				t.Errorf("/%s: mode %v, %v; want %v", n, fi.Mode(), err, m)
			}
		}
	}
}

func all(fs ...func(*testing.T, string)) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		for _, f := range fs {
			f(t, root)
		}
	}
}

func TestPullLimits(t *testing.T) {
	reg := startRegistry(t, nil)
	ref := reg.push(t, "org/big:v1", hostImage(t,
		layer(t, file("a", strings.Repeat("a", 1000)), file("b", strings.Repeat("b", 1000))),
		layer(t, file("c", "c"), file("d", "d"), file("e", "e"))))
	for _, tt := range []struct {
		name   string
		limits Limits
		msg    string
	}{
		{"total bytes", Limits{Bytes: 1500}, "more than 1500 bytes"},
		{"file size", Limits{FileSize: 999}, "per-file limit of 999"},
		{"entries", Limits{Files: 4}, "more than 4 entries"},
		{"layers", Limits{Layers: 1}, "2 layers, over the limit of 1"},
		{"compressed bytes", Limits{Bytes: 100}, "over the limit of 100"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := pullOpts(t)
			opts.Limits = tt.limits
			_, err := Pull(context.Background(), ref, opts)
			if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Pull: %v, want ErrLimit saying %q", err, tt.msg)
			}
			storeClean(t, opts.Store, 0)
		})
	}
	opts := pullOpts(t)
	opts.Limits = Limits{Bytes: 2003, Files: 5, FileSize: 1000, Layers: 2}
	if _, err := Pull(context.Background(), ref, opts); err != nil {
		t.Fatalf("Pull at the limits: %v", err)
	}
}
