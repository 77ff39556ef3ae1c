package sandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// probeEnv names a prebuilt rootprobe: the unprivileged run of the image
// tests gets it from the parent, having no Go build cache of its own.
const probeEnv = "MCPBOX_TEST_ROOTPROBE"

// buildStatic builds the program in testdata/NAME as a static binary at
// dst, or skips without a Go toolchain.
func buildStatic(t *testing.T, name, dst string) {
	t.Helper()
	if pre := os.Getenv(probeEnv); pre != "" && name == "rootprobe" {
		if err := copyFile(pre, dst); err != nil {
			t.Fatal(err)
		}
		return
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain to build %s: %v", name, err)
	}
	cmd := exec.Command(gobin, "build", "-o", dst, "./testdata/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, out)
	}
}

// imageRoot makes a small image root: a static probe in /bin, an /etc
// with one file, a top-level symlink pointing at the host tree as the
// init sees it, and a /run the sandbox must ignore.
func imageRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	for _, d := range []string{"bin", "etc", "app/data", "run"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	buildStatic(t, "rootprobe", filepath.Join(root, "bin", "rootprobe"))
	files := map[string]string{
		"etc/os-release": "IMAGE",
		"etc/hosts":      "10.0.0.1 image-hosts-must-not-win",
		"app/data/x":     "appdata",
		"run/planted":    "planted",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, dest := range map[string]string{"hostroot": "/oldroot", "lib": "usr/lib", "etc/hostetc": "/oldroot/etc"} {
		if err := os.Symlink(dest, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func runProbe(t *testing.T, spec Spec) []string {
	t.Helper()
	var out, errb bytes.Buffer
	res, err := Run(context.Background(), spec, Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("Run: %v (stderr %q)", err, errb.String())
	}
	if res.ExitCode != 0 {
		t.Fatalf("probe exit %d, stderr %q", res.ExitCode, errb.String())
	}
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

func TestImageRootReplacesHostSystem(t *testing.T) {
	requireSandbox(t)
	// The host must have what the image view has to hide, or the test
	// proves nothing.
	for _, p := range []string{"/usr/bin/sh", "/etc/os-release"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("host has no %s to hide: %v", p, err)
		}
	}
	root := imageRoot(t)
	spec := quick("rootprobe",
		"stat:/usr/bin/sh", "read:/etc/os-release", "read:/app/data/x", "stat:/bin/rootprobe",
		"stat:/hostroot/etc", "stat:/etc/hostetc/passwd", "stat:/image", "stat:/oldroot",
		"stat:/run/planted", "read:/etc/hostname", "write:/app/data/y", "write:/bin/new",
		"stat:/workspace", "stat:/proc/self", "stat:/dev/null", "write:/tmp/t")
	spec.Root = root
	spec.Env = []string{"PATH=/bin"}
	got := runProbe(t, spec)
	want := []string{
		"stat /usr/bin/sh: error", // the host's /usr is not there
		"read /etc/os-release: IMAGE",
		"read /app/data/x: appdata",
		"stat /bin/rootprobe: ok",
		"stat /hostroot/etc: error", // links resolve inside the sandbox
		"stat /etc/hostetc/passwd: error",
		"stat /image: error",
		"stat /oldroot: error",
		"stat /run/planted: error", // the image's /run is not used
		"read /etc/hostname: mcpbox",
		"write /app/data/y: error", // read-only
		"write /bin/new: error",
		"stat /workspace: ok",
		"stat /proc/self: ok",
		"stat /dev/null: ok",
		"write /tmp/t: ok",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("probe (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(root, "app/data/y")); err == nil {
		t.Fatal("the workload wrote into the image root on the host")
	}
}

// An image whose /etc is a symlink to the host's /etc (as the init sees
// it) must not lend the sandbox a single host file.
func TestImageRootEtcSymlinkNotFollowed(t *testing.T) {
	requireSandbox(t)
	root := imageRoot(t)
	if err := os.RemoveAll(filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/oldroot/etc", filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	spec := quick("rootprobe", "stat:/etc/os-release", "stat:/etc/passwd", "stat:/etc/ld.so.cache")
	spec.Root = root
	spec.Env = []string{"PATH=/bin"}
	got := runProbe(t, spec)
	want := []string{"stat /etc/os-release: error", "stat /etc/passwd: ok", "stat /etc/ld.so.cache: error"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("probe (-want +got):\n%s", diff)
	}
}

func TestImageRootMustBeCleanAbsolute(t *testing.T) {
	requireSandbox(t)
	for _, r := range []string{"rel/root", "/", "/tmp/../etc"} {
		spec := quick("true")
		spec.Root = r
		if _, err := Start(context.Background(), spec, Stdio{}); err == nil || !strings.Contains(err.Error(), "root") {
			t.Errorf("Root %q: Start error %v, want a refusal naming the root", r, err)
		}
	}
}

// TestImageRootUnprivileged runs the image root tests as a user without
// privileges, where the sandbox maps the invoking uid instead of
// idmapping root's files.
func TestImageRootUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Getuid() != 0 {
		t.Skip("already unprivileged: the other tests cover it")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	probe := filepath.Join(dir, "rootprobe")
	buildStatic(t, "rootprobe", probe)
	runUnprivilegedEnv(t, []string{probeEnv + "=" + probe},
		"TestImageRootReplacesHostSystem", "TestImageRootEtcSymlinkNotFollowed", "TestImageRootTrustBundle")
}

// TestImageRootDynamicBinary runs a dynamically linked shell from an image
// root laid out like a merged-/usr distribution image (/bin, /lib, /lib64
// links into /usr): the loader and libc come from the image.
func TestImageRootDynamicBinary(t *testing.T) {
	requireSandbox(t)
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skipf("no /bin/sh: %v", err)
	}
	if _, err := os.Stat("/usr/bin/ls"); err != nil {
		t.Skipf("host has no /usr/bin/ls to hide: %v", err)
	}
	out, err := exec.Command("ldd", sh).Output()
	if err != nil {
		t.Skipf("ldd %s: %v", sh, err)
	}
	root := filepath.Join(t.TempDir(), "root")
	files := []string{sh}
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				files = append(files, f)
			}
		}
	}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(real)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(real, filepath.Join(root, real)); err != nil {
			t.Fatal(err)
		}
		// The name the binary or the loader asks for, if it is a link.
		if f != real {
			if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
				os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755)
				os.Symlink(real, filepath.Join(root, f))
			}
		}
	}
	for _, top := range []string{"bin", "lib", "lib64", "sbin"} {
		if dest, err := os.Readlink("/" + top); err == nil {
			if _, err := os.Lstat(filepath.Join(root, top)); err != nil {
				if err := os.Symlink(dest, filepath.Join(root, top)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	spec := quick(sh, "-c", "echo dynamic-ok; [ -e /usr/bin/ls ] && echo host-ls || echo no-ls")
	spec.Root = root
	var stdout, stderr bytes.Buffer
	res, err := Run(context.Background(), spec, Stdio{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || stdout.String() != "dynamic-ok\nno-ls\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the image's shell without the host's ls", res.ExitCode, stdout.String(), stderr.String())
	}
}
