package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// maskScript looks for the output through the input, and tries to write
// it, unmask it or move it away there.
const maskScript = `cd /workspace/input
echo "masked: [$(ls -A out)]"
echo "output: $(cat /workspace/output/old.txt)"
echo new > /workspace/output/new.txt
if cat out/new.txt out/old.txt 2>/dev/null; then echo "input read: allowed"; else echo "input read: denied"; fi
if echo x > out/x 2>/dev/null; then echo "input write: allowed"; else echo "input write: denied"; fi
if umount out 2>/dev/null; then echo "umount: allowed"; else echo "umount: denied"; fi
if rmdir out 2>/dev/null || mv out moved 2>/dev/null; then echo "remove: allowed"; else echo "remove: denied"; fi
echo "files: $(ls | tr '\n' ' ')"
echo "other: $(cat a.txt)"
`

const maskWant = `masked: []
output: old
input read: denied
input write: denied
umount: denied
remove: denied
files: a.txt out 
other: a
`

// maskDirs makes a project with the output inside it, as the default's
// ./mcpbox-out, and overlay layers beside it.
func maskDirs(t *testing.T) (src string, ov *Overlay) {
	t.Helper()
	base := t.TempDir()
	src = base + "/src"
	for name, content := range map[string]string{"a.txt": "a\n", "out/old.txt": "old\n"} {
		if err := os.MkdirAll(filepath.Dir(src+"/"+name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(src+"/"+name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ov = &Overlay{Upper: base + "/overlay/upper", Work: base + "/overlay/work"}
	for _, d := range []string{ov.Upper, ov.Work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.Chmod(ov.Work+"/work", 0o700) })
	return src, ov
}

// TestInputMaskHidesOutput: the output inside the input is seen once, at
// /workspace/output; through the input it is an empty read-only dir the
// workload can neither write, unmount nor move, with the input bound
// read-only or as an overlay (whose upper layer then records nothing).
func TestInputMaskHidesOutput(t *testing.T) {
	requireSandbox(t)
	for _, overlay := range []bool{false, true} {
		name := map[bool]string{false: "bind", true: "overlay"}[overlay]
		t.Run(name, func(t *testing.T) {
			src, ov := maskDirs(t)
			spec := quick("sh", "-c", maskScript)
			spec.Input, spec.Output = src, src+"/out"
			if overlay {
				spec.InputOverlay = ov
			}
			if d := cmp.Diff(maskWant, runOverlay(t, spec)); d != "" {
				t.Errorf("workload's view (-want +got):\n%s", d)
			}
			if b, err := os.ReadFile(src + "/out/new.txt"); err != nil || string(b) != "new\n" {
				t.Errorf("output/new.txt on the host: %q, %v", b, err)
			}
			if _, err := os.Lstat(src + "/out/x"); err == nil {
				t.Errorf("the write through the input reached the output")
			}
			if got := snapshot(t, ov.Upper); len(got) != 1 {
				t.Errorf("the overlay's upper dir recorded changes: %v", got)
			}
		})
	}
}

// TestInputMaskNoLinks: an overlay whose upper layer (an earlier run's, or
// a snapshot's) holds a link where the output was does not carry the mask
// to the link's target: the mask is skipped, and the target stays as it
// is. The output does not show through the link either.
func TestInputMaskNoLinks(t *testing.T) {
	requireSandbox(t)
	src, ov := maskDirs(t)
	if err := os.Mkdir(src+"/keep", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src+"/keep/k.txt", []byte("k\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("keep", ov.Upper+"/out"); err != nil {
		t.Fatal(err)
	}
	spec := quick("sh", "-c", `cd /workspace/input; echo "link: $(readlink out) [$(ls -A out/)]"; echo w > keep/w.txt && echo "keep: $(cat keep/w.txt)"`)
	spec.Input, spec.Output, spec.InputOverlay = src, src+"/out", ov
	if got, want := runOverlay(t, spec), "link: keep [k.txt]\nkeep: w\n"; got != want {
		t.Errorf("workload printed %q, want %q", got, want)
	}
}
