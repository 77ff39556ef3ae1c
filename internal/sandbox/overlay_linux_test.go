package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// overlayDirs makes a lower dir with a few files, a symlink to /etc and a
// directory, and empty upper and work dirs (mode 0700, as the lead's
// workspaces will have them).
func overlayDirs(t *testing.T) (lower string, ov *Overlay) {
	t.Helper()
	base := t.TempDir()
	lower = base + "/src"
	files := map[string]string{
		"keep.txt": "keep\n", "modify.txt": "before\n", "delete.txt": "gone\n",
		"rename.txt": "moved\n", "olddir/inner.txt": "inner\n", "sub/deep.txt": "deep\n",
	}
	for name, content := range files {
		p := lower + "/" + name
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", lower+"/etclink"); err != nil {
		t.Fatal(err)
	}
	ov = &Overlay{Upper: base + "/overlay/upper", Work: base + "/overlay/work"}
	for _, d := range []string{ov.Upper, ov.Work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Overlayfs leaves work/work with mode 0: an unprivileged owner must
	// open it up before removing it (runs before TempDir's RemoveAll).
	t.Cleanup(func() { _ = os.Chmod(ov.Work+"/work", 0o700) })
	return lower, ov
}

// snapshot records every entry under dir: type, mode, owner, content or
// link target.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		v := fi.Mode().String() + " " + strconv.Itoa(int(st.Uid)) + ":" + strconv.Itoa(int(st.Gid)) + " " + fi.ModTime().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[strings.TrimPrefix(p, dir)] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// overlayScript changes the overlay in every way the upper dir records,
// and prints what the workload sees.
const overlayScript = `set -e
cd /workspace/input
echo new > new.txt
echo after > modify.txt
rm delete.txt
mv rename.txt renamed.txt
mkdir newdir
echo x > newdir/f.txt
rm -r olddir
mkdir olddir
echo fresh > olddir/fresh.txt
echo "files: $(ls | tr '\n' ' ')"
echo "read: $(cat new.txt modify.txt renamed.txt olddir/fresh.txt sub/deep.txt | tr '\n' ' ')"
echo "olddir: $(ls olddir | tr '\n' ' ')"
echo "link: $(readlink etclink) $(grep -c '^mcpbox:' etclink/passwd)"
if echo x > etclink/mcpbox-overlay-test 2>/dev/null; then echo "link write: allowed"; else echo "link write: denied"; fi
cp /bin/true ./mytrue
if ./mytrue 2>/dev/null; then echo "exec: allowed"; else echo "exec: denied"; fi
`

const overlayWant = `files: etclink keep.txt modify.txt new.txt newdir olddir renamed.txt sub 
read: new after moved fresh deep 
olddir: fresh.txt 
link: /etc 1
link write: denied
exec: denied
`

func runOverlay(t *testing.T, spec Spec) string {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := Run(context.Background(), spec, Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, out.String(), errb.String())
	}
	return out.String()
}

func TestInputOverlay(t *testing.T) {
	requireSandbox(t)
	lower, ov := overlayDirs(t)
	before := snapshot(t, lower)
	spec := quick("sh", "-c", overlayScript)
	spec.Input, spec.InputOverlay = lower, ov
	if diff := cmp.Diff(overlayWant, runOverlay(t, spec)); diff != "" {
		t.Fatalf("workload's view (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, snapshot(t, lower)); diff != "" {
		t.Fatalf("the lower dir changed (-before +after):\n%s", diff)
	}
	checkUpper(t, ov.Upper)
	// The link resolved in the sandbox's /etc (whose passwd has the
	// sandbox user, the host's has not), and wrote nothing to the host's.
	if _, err := os.Lstat("/etc/mcpbox-overlay-test"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("host /etc/mcpbox-overlay-test: %v, want it absent", err)
	}
	// A second run on the same upper and work dirs sees the first's
	// changes: workspaces persist across sandboxes.
	spec.Args = []string{"sh", "-c", "cat /workspace/input/new.txt; test ! -e /workspace/input/delete.txt && echo deleted"}
	if got := runOverlay(t, spec); got != "new\ndeleted\n" {
		t.Errorf("second run printed %q, want the first run's changes", got)
	}
}

func TestInputOverlayExecWritable(t *testing.T) {
	requireSandbox(t)
	lower, ov := overlayDirs(t)
	spec := quick("sh", "-c", "cp /bin/true /workspace/input/t && /workspace/input/t && echo ran")
	spec.Input, spec.InputOverlay, spec.ExecWritable = lower, ov, true
	if got := runOverlay(t, spec); got != "ran\n" {
		t.Fatalf("with ExecWritable: %q, want the copied binary to run", got)
	}
}

// A Spec whose overlay cannot be mounted fails to start, naming the
// overlay; nothing falls back to a plain bind.
func TestInputOverlayFailsClosed(t *testing.T) {
	requireSandbox(t)
	lower, ov := overlayDirs(t)
	tests := []struct {
		name string
		edit func(*Spec)
		msg  string
	}{
		{"no input", func(s *Spec) { s.Input = "" }, "without an input"},
		{"upper in input", func(s *Spec) { s.InputOverlay = &Overlay{Upper: lower + "/sub", Work: ov.Work} }, "overlap"},
		{"missing upper", func(s *Spec) { s.InputOverlay = &Overlay{Upper: ov.Upper + "x", Work: ov.Work} }, "upperx"},
		{"upper is a file", func(s *Spec) {
			file := filepath.Dir(ov.Upper) + "/file"
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			s.InputOverlay = &Overlay{Upper: file, Work: ov.Work}
		}, "not a directory"},
	}
	if os.Geteuid() == 0 {
		// The host's checks pass, but the work dir belongs to a uid with no
		// mapping in the sandbox: overlayfs would mount read-only.
		tests = append(tests, struct {
			name string
			edit func(*Spec)
			msg  string
		}{"work dir unusable", func(s *Spec) {
			if err := os.Chown(ov.Work, 12345, 12345); err != nil {
				t.Fatal(err)
			}
		}, "read-only"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := quick("sh", "-c", "echo ran")
			spec.Input, spec.InputOverlay = lower, ov
			tt.edit(&spec)
			var out bytes.Buffer
			_, err := Start(context.Background(), spec, Stdio{Stdout: &out})
			var se *StartError
			if !errors.As(err, &se) || se.Layer != LayerOverlay || se.Code != exitSetup || !strings.Contains(se.Error(), tt.msg) {
				t.Fatalf("Start: %v (%#v), want a StartError of layer overlay containing %q", err, se, tt.msg)
			}
			if out.Len() > 0 {
				t.Fatalf("the workload ran: %q", out.String())
			}
		})
	}
}

// TestInputOverlayUnprivileged runs TestInputOverlay again as an
// unprivileged user, the other way the sandbox maps uids, when the tests
// run as root (as a user, TestInputOverlay covers that mode itself).
func TestInputOverlayUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: TestInputOverlay already runs unprivileged")
	}
	runUnprivileged(t, "TestInputOverlay", "TestInputOverlayExecWritable", "TestInputOverlayFailsClosed", "TestInputOverlayForgedOpaque",
		"TestInputOverlayNoSetID", "TestInputMaskHidesOutput", "TestInputMaskNoLinks")
}

// checkUpper checks the upper dir holds the changes in overlayfs's
// format, owned by the test's user.
func checkUpper(t *testing.T, upper string) {
	t.Helper()
	uid := os.Getuid()
	want := map[string]string{
		"new.txt": "file new\n", "modify.txt": "file after\n", "renamed.txt": "file moved\n",
		"newdir": "dir", "newdir/f.txt": "file x\n", "olddir": "dir", "olddir/fresh.txt": "file fresh\n",
		"mytrue":     "file",
		"delete.txt": "whiteout", "rename.txt": "whiteout",
	}
	got := map[string]string{}
	err := filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == upper {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, upper+"/")
		if int(st.Uid) != uid || int(st.Gid) != os.Getgid() {
			t.Errorf("upper %s owned by %d:%d, want %d:%d", rel, st.Uid, st.Gid, uid, os.Getgid())
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev != 0 {
				t.Errorf("upper %s: char device %d, want a 0/0 whiteout", rel, st.Rdev)
			}
			got[rel] = "whiteout"
		case unix.S_IFDIR:
			got[rel] = "dir"
		case unix.S_IFREG:
			got[rel] = "file"
			if rel != "mytrue" {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				got[rel] += " " + string(b)
			}
		default:
			got[rel] = "mode " + strconv.Itoa(int(st.Mode))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upper dir (-want +got):\n%s", diff)
	}
	// A directory deleted and made again hides the lower one's entries.
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(upper+"/olddir", "user.overlay.opaque", buf)
	if err != nil || string(buf[:n]) != "y" {
		t.Errorf("olddir's user.overlay.opaque: %q, %v; want \"y\"", buf[:max(n, 0)], err)
	}
	if _, err := unix.Lgetxattr(upper+"/newdir", "user.overlay.opaque", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("newdir's user.overlay.opaque: %v, want ENODATA", err)
	}
}

// The cost of the overlay next to BenchmarkRunSandbox (same command).
func BenchmarkRunSandboxInputOverlay(b *testing.B) {
	if probeHost().usernsErr != nil {
		b.Skip("user namespaces unavailable")
	}
	dir := b.TempDir()
	spec := Spec{Args: []string{"/bin/true"}, Limits: Limits{Memory: 256 << 20, Pids: 64},
		Input: dir + "/src", InputOverlay: &Overlay{Upper: dir + "/upper", Work: dir + "/work"}}
	for _, d := range []string{spec.Input, spec.InputOverlay.Upper, spec.InputOverlay.Work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { _ = os.Chmod(spec.InputOverlay.Work+"/work", 0o700) })
	for b.Loop() {
		res, err := Run(context.Background(), spec, Stdio{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// The workload cannot mark a directory opaque in the upper dir by setting
// overlayfs's xattr itself (a diff of the upper dir trusts it).
func TestInputOverlayForgedOpaque(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to call setxattr with")
	}
	lower, ov := overlayDirs(t)
	spec := quick("python3", "-c", `import os
os.mkdir("/workspace/input/d")
os.setxattr("/workspace/input/d", "user.overlay.opaque", b"y")
os.setxattr("/workspace/input/sub", "user.overlay.opaque", b"y")
print(sorted(os.listdir("/workspace/input/sub")))`)
	spec.Input, spec.InputOverlay = lower, ov
	if got := runOverlay(t, spec); got != "['deep.txt']\n" {
		t.Fatalf("workload saw %q, want the lower dir's entries still visible", got)
	}
	for _, d := range []string{"d", "sub"} {
		buf := make([]byte, 8)
		if _, err := unix.Lgetxattr(ov.Upper+"/"+d, "user.overlay.opaque", buf); !errors.Is(err, unix.ENODATA) {
			t.Errorf("upper %s carries user.overlay.opaque (%v): the workload forged an opaque dir", d, err)
		}
	}
}

// The workload cannot leave a setuid or setgid file in the upper dir: the
// upper dir is a host directory, where the sandbox's nosuid mount flag no
// longer holds. It tries every way: a chmod of a lower file (a copy-up), a
// new file, and writing into lower files that already carry the bits
// (overlayfs copies up with the init's credentials; the kernel strips the
// bits on a write, not on a copy-up alone).
func TestInputOverlayNoSetID(t *testing.T) {
	requireSandbox(t)
	lower, ov := overlayDirs(t)
	for _, f := range []string{"tool", "trunc", "touched", "plain"} {
		if err := copyFile("/bin/true", lower+"/"+f); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"tool", "trunc", "touched"} {
		if err := os.Chmod(lower+"/"+f, 0o755|os.ModeSetuid|os.ModeSetgid); err != nil {
			t.Fatal(err)
		}
	}
	// A host setuid file the upper dir links to: stripping the bits must
	// not follow the workload's symlinks.
	outside := filepath.Dir(ov.Upper) + "/outside"
	if err := copyFile("/bin/true", outside); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(outside, 0o755|os.ModeSetuid|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	spec := quick("sh", "-c", `cd /workspace/input
stat -c '%n %A' tool trunc touched
ln -s `+outside+` evil
chmod u+s,g+s plain keep.txt 2>&1
cp /bin/true new && chmod 6755 new 2>&1
printf x >> tool
printf '#!/bin/sh\necho pwned\n' > trunc
touch touched
stat -c '%n %A %s' tool trunc touched plain keep.txt new`)
	spec.Input, spec.InputOverlay = lower, ov
	out := runOverlay(t, spec)
	t.Logf("workload's view:\n%s", out)
	var found []string
	err := filepath.WalkDir(ov.Upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			found = append(found, strings.TrimPrefix(p, ov.Upper)+" "+strconv.FormatUint(uint64(st.Mode), 8))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("setuid/setgid files in the upper dir on the host: %v", found)
	}
	// The writes landed: the test attacked what it meant to.
	for _, f := range []string{"tool", "trunc", "touched", "new", "evil"} {
		if _, err := os.Lstat(ov.Upper + "/" + f); err != nil {
			t.Errorf("upper %s: %v; the workload's write did not land", f, err)
		}
	}
	for _, p := range []string{lower + "/touched", outside} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != os.ModeSetuid|os.ModeSetgid {
			t.Errorf("%s: %v, %v; want its setuid and setgid bits untouched", p, fi.Mode(), err)
		}
	}
}

// TestInputOverlayUnmountedByWait: the host holds a sandbox's mount
// namespace past its init (holdMounts), but not one with an input
// overlay: that is gone when Wait returns, before stripSetID walks the
// upper dir and before the next sandbox mounts the same upper and work
// dirs.
func TestInputOverlayUnmountedByWait(t *testing.T) {
	requireSandbox(t)
	lower, ov := overlayDirs(t)
	spec := quick("cat")
	spec.Input, spec.InputOverlay = lower, ov
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sb, err := Start(context.Background(), spec, Stdio{Stdin: r})
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	fd := sb.mntNS
	ns, _ := os.Readlink("/proc/" + strconv.Itoa(sb.cmd.Process.Pid) + "/ns/mnt")
	w.Close()
	if _, err := sb.Wait(); err != nil {
		t.Fatal(err)
	}
	if fd < 0 || ns == "" {
		t.Fatalf("mount namespace not held (fd %d, %q)", fd, ns)
	}
	if l, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); l == ns {
		t.Fatal("the overlay sandbox's mount namespace is still open after Wait")
	}
}
