//go:build linux

package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// state describes every entry beneath dir, read with plain os calls (a
// slow, obviously correct reader to check the package against).
func state(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		mode := st.Mode & 0o7777
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			out[rel] = fmt.Sprintf("dir %04o%s", mode, opaqueOf(p))
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %04o %q", mode, b)
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case unix.S_IFCHR:
			out[rel] = fmt.Sprintf("chr %d", st.Rdev)
		default:
			out[rel] = fi.Mode().Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func opaqueOf(p string) string {
	buf := make([]byte, 4)
	for _, name := range opaqueXattrs {
		if n, err := unix.Lgetxattr(p, name, buf); err == nil {
			return " opaque(" + name + "=" + string(buf[:n]) + ")"
		}
	}
	return ""
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// mknodWhiteout makes an overlay whiteout or skips the test.
func mknodWhiteout(t *testing.T, path string) {
	t.Helper()
	if err := unix.Mknod(path, unix.S_IFCHR, 0); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("making a 0/0 character device needs CAP_MKNOD: %v", err)
		}
		t.Fatal(err)
	}
}

// setOpaque marks dir opaque with the first xattr the filesystem and our
// privileges allow, or skips the test.
func setOpaque(t *testing.T, dir string) string {
	t.Helper()
	var errs []error
	for _, name := range opaqueXattrs {
		err := unix.Setxattr(dir, name, []byte("y"), 0)
		if err == nil {
			return name
		}
		errs = append(errs, err)
	}
	t.Skipf("cannot set an overlay opaque xattr here: %v", errs)
	return ""
}

// tarEntry is a header plus body for makeTar.
type tarEntry struct {
	hdr  tar.Header
	body string
}

func reg(name, body string) tarEntry {
	return tarEntry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body}
}

func makeTarBytes(t testing.TB, entries []tarEntry, gz bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	var zw *gzip.Writer
	tw := tar.NewWriter(&buf)
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	}
	for _, e := range entries {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func makeTar(t testing.TB, dir, name string, entries []tarEntry) string {
	t.Helper()
	p := filepath.Join(dir, name)
	gz := strings.HasSuffix(name, ".gz") || strings.HasSuffix(name, ".tgz")
	if err := os.WriteFile(p, makeTarBytes(t, entries, gz), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// jail returns a fresh dst inside an otherwise empty parent, and a check
// that the parent still holds nothing but dst.
func jail(t testing.TB) (dst string, clean func() error) {
	t.Helper()
	parent := t.TempDir()
	dst = filepath.Join(parent, "dst")
	return dst, func() error {
		names, err := os.ReadDir(parent)
		if err != nil {
			return err
		}
		for _, n := range names {
			if n.Name() != "dst" {
				return fmt.Errorf("%s appeared beside dst", n.Name())
			}
		}
		return nil
	}
}
