package builtin

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// oPath is O_PATH on amd64 and arm64; package syscall lacks it.
const oPath = 0x200000

// symlinkTree builds a root full of symlinks (inward, outward, absolute,
// looping, dangling) and returns an O_PATH fd of it, or skips the test
// when the kernel has no openat2 to compare with.
func symlinkTree(tb testing.TB) int {
	tb.Helper()
	base := tb.TempDir()
	root := filepath.Join(base, "root")
	for _, d := range []string{"a/b/c", "x"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for p, content := range map[string]string{"root/f": "file", "root/a/b/c/g": "deep", "secret": "outside"} {
		if err := os.WriteFile(filepath.Join(base, p), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	links := map[string]string{
		"up": "..", "abs": "/etc", "loop1": "loop2", "loop2": "loop1", "deep": "a/b/c",
		"esc": "a/../../secret", "a/b/toroot": "../..", "a/b/sib": "../../x", "a/self": ".",
		"dang": "nowhere", "tof": "f",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			tb.Fatal(err)
		}
	}
	fd, err := syscall.Open(root, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Close(fd) })
	kernelOpenat2.Store(true)
	probe, err := openat2(fd, ".", oPath, resolveFlags)
	if err == nil {
		syscall.Close(probe)
	}
	if !kernelOpenat2.Load() {
		kernelOpenat2.Store(true)
		tb.Skip("no kernel openat2 to compare with (seccomp or old kernel)")
	}
	return fd
}

// compareResolvers opens rel with the kernel and with the userspace
// resolver: both must open the same inode or fail with the same errno.
func compareResolvers(tb testing.TB, rootfd int, rel string, nofollow bool) {
	flags := uint64(oPath)
	if nofollow {
		flags |= syscall.O_NOFOLLOW
	}
	kfd, kerr := openat2(rootfd, rel, flags, resolveFlags)
	kernelOpenat2.Store(false)
	ufd, uerr := openat2(rootfd, rel, flags, resolveFlags)
	kernelOpenat2.Store(true)
	defer func() {
		for _, fd := range []int{kfd, ufd} {
			if fd >= 0 {
				syscall.Close(fd)
			}
		}
	}()
	if !errors.Is(kerr, uerr) && !(kerr == nil && uerr == nil) {
		tb.Errorf("%q (nofollow %v): openat2 %v, userspace %v", rel, nofollow, kerr, uerr)
		return
	}
	if kerr == nil {
		var ks, us syscall.Stat_t
		syscall.Fstat(kfd, &ks)
		syscall.Fstat(ufd, &us)
		if ks.Dev != us.Dev || ks.Ino != us.Ino {
			tb.Errorf("%q (nofollow %v): openat2 and userspace opened different files", rel, nofollow)
		}
	}
}

// TestOpenBeneathMatchesOpenat2 compares the resolvers on random paths
// built from the tree's names.
func TestOpenBeneathMatchesOpenat2(t *testing.T) {
	rootfd := symlinkTree(t)
	alphabet := []string{"a", "b", "c", "g", "f", "x", "up", "abs", "loop1", "deep", "esc", "toroot", "sib", "self",
		"dang", "tof", "..", ".", "", "missing"}
	rng := rand.New(rand.NewSource(1))
	for i := range 3000 {
		comps := make([]string, 1+rng.Intn(6))
		for j := range comps {
			comps[j] = alphabet[rng.Intn(len(alphabet))]
		}
		compareResolvers(t, rootfd, strings.Join(comps, "/"), i%2 == 1)
	}
}

func FuzzOpenBeneath(f *testing.F) {
	for _, seed := range []string{"a/b/c/g", "up/x", "a/b/toroot/f", "esc", "deep/../../f", "a/self/self/b", "/etc", ""} {
		f.Add(seed, false)
	}
	rootfd := symlinkTree(f)
	f.Fuzz(func(t *testing.T, rel string, nofollow bool) {
		if strings.ContainsRune(rel, 0) {
			return
		}
		compareResolvers(t, rootfd, rel, nofollow)
	})
}
