package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Size limits of the workspace dirs (Limits.OutputSize, InputSize). The
// output and the overlay's upper dir are host directories: nothing about
// them is bounded by the sandbox's memory or /tmp, and an unprivileged
// caller has no size-limited file system to put under them (loop devices
// need root, project quotas are rarely enabled, a tmpfs does not persist).
// Two mechanisms bound them instead:
//
//   - RLIMIT_FSIZE, set for the workload to the larger limit: no single
//     file grows past it; write, truncate and fallocate beyond it fail
//     with SIGXFSZ (EFBIG when caught), before anything is allocated.
//   - A watcher in mcpbox that measures each limited dir every
//     sizeInterval (up to sizeMaxInterval for trees that take long to
//     walk, see nextMeasure) and kills the sandbox once one holds more
//     than its limit, or cannot be measured.
//
// The slack is what the workload writes between two measurements: many
// files, each below the limit, written at the host's disk speed for one
// interval plus one walk (plus scheduling delay on a loaded host). A
// workload cannot stretch that past sizeMaxInterval plus the walk of
// maxWalkEntries entries by piling up empty files. What is on the host
// when the sandbox is killed stays there.
const (
	sizeInterval = 50 * time.Millisecond
	// sizeWalkShare: the watcher waits this many times as long as its
	// last walk took, so it spends about a tenth of a core on a large
	// tree, up to sizeMaxInterval, which bounds the slack instead.
	sizeWalkShare   = 10
	sizeMaxInterval = time.Second
	// maxWalkDepth bounds the walk's open directories (one fd per level),
	// maxWalkEntries its length; a tree past either cannot be measured
	// and stops the sandbox.
	maxWalkDepth   = 512
	maxWalkEntries = 1 << 20
)

// sizeLimit is one limited dir: where the host has it, where the sandbox
// sees it, and its limit.
type sizeLimit struct {
	host, dir string
	limit     int64
}

// sizeLimits lists the Spec's limited dirs.
func (s *Spec) sizeLimits() []sizeLimit {
	var ls []sizeLimit
	if s.Output != "" && s.Limits.OutputSize > 0 {
		ls = append(ls, sizeLimit{s.Output, OutputDir, s.Limits.OutputSize})
	}
	// Only the upper dir: the work dir holds copy-ups in flight (and a
	// work/work of mode 0 that an unprivileged caller cannot read).
	if s.InputOverlay != nil && s.Limits.InputSize > 0 {
		ls = append(ls, sizeLimit{s.InputOverlay.Upper, InputDir, s.Limits.InputSize})
	}
	return ls
}

// fileSizeLimit is the workload's RLIMIT_FSIZE: the largest dir limit, or
// zero (none) when no dir is limited.
func (s *Spec) fileSizeLimit() int64 {
	var n int64
	for _, l := range s.sizeLimits() {
		n = max(n, l.limit)
	}
	return n
}

// check measures every limited dir once and returns the first over its
// limit or not measurable.
func checkSizes(ls []sizeLimit) *SizeError {
	for _, l := range ls {
		used, err := diskUsage(l.host)
		if err != nil {
			return &SizeError{Dir: l.dir, Host: l.host, Limit: l.limit, Err: err}
		}
		if used > l.limit {
			return &SizeError{Dir: l.dir, Host: l.host, Limit: l.limit, Used: used}
		}
	}
	return nil
}

// watchSizes measures the limited dirs until stop is closed, and kills
// the sandbox at the first one over its limit. It closes done when it
// returns.
func (sb *Sandbox) watchSizes(ls []sizeLimit, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTimer(0)
	defer t.Stop()
	first := true
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if sb.paused.Load() { // frozen: nothing writes
			t.Reset(sizeInterval)
			continue
		}
		began := time.Now()
		if e := checkSizes(ls); e != nil {
			e.Stopped, e.AtStart = true, first && e.Err == nil
			sb.setSizeErr(e)
			sb.Kill()
			return
		}
		first = false
		t.Reset(nextMeasure(time.Since(began)))
	}
}

// nextMeasure is the wait after a walk that took took.
func nextMeasure(took time.Duration) time.Duration {
	return min(max(sizeInterval, sizeWalkShare*took), sizeMaxInterval)
}

func (sb *Sandbox) setSizeErr(e *SizeError) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.sizeErr == nil {
		sb.sizeErr = e
	}
}

// diskUsage returns the bytes allocated to the tree at dir: st_blocks of
// every file and directory in it, each hard-linked inode once. It opens
// each directory relative to its parent, never following a symlink, so
// that a workload cannot point the walk elsewhere. Entries that vanish or
// turn into something else during the walk are skipped (the next walk sees
// them where they went); a directory it may not read is an error, not a
// zero.
func diskUsage(dir string) (int64, error) { return diskUsageMax(dir, maxWalkEntries) }

// diskUsageMax is diskUsage giving up after maxEntries entries.
func diskUsageMax(dir string, maxEntries int) (int64, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, fmt.Errorf("checking %s: %w", dir, err)
	}
	w := &usageWalk{links: map[[2]uint64]bool{}, max: maxEntries, left: maxEntries}
	w.total = st.Blocks * 512
	err = w.dir(fd, dir, 0)
	return w.total, err
}

type usageWalk struct {
	total int64
	max   int                // entries the walk may visit
	left  int                // of which are left
	links map[[2]uint64]bool // inodes with more than one link, counted once
}

// dir adds the entries of the open directory fd (named path in errors),
// which it closes.
func (w *usageWalk) dir(fd int, path string, depth int) error {
	if depth >= maxWalkDepth {
		unix.Close(fd)
		return fmt.Errorf("%s: deeper than %d levels", path, maxWalkDepth)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			if err := w.entry(fd, path, name, depth); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
	}
}

func (w *usageWalk) entry(dirfd int, dir, name string, depth int) error {
	path := dir + "/" + name
	if w.left--; w.left < 0 {
		return fmt.Errorf("%s: more than %d entries to measure", path, w.max)
	}
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if vanished(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
		id := [2]uint64{st.Dev, st.Ino}
		if w.links[id] {
			return nil
		}
		w.links[id] = true
	}
	w.total += st.Blocks * 512
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	sub, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if vanished(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	return w.dir(sub, path, depth+1)
}

// vanished reports whether err means the entry went away or was replaced
// (by a file or a symlink) between reading its name and opening it.
func vanished(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// pipeRegularFiles hides a regular file given as stdout or stderr behind
// a pipe (os/exec copies into it): RLIMIT_FSIZE counts every regular file
// the workload writes, and a host log that mcpbox's output is redirected
// to is no workspace dir.
func pipeRegularFiles(stdio Stdio) Stdio {
	wrap := func(w io.Writer) io.Writer {
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
				return struct{ io.Writer }{f}
			}
		}
		return w
	}
	stdio.Stdout, stdio.Stderr = wrap(stdio.Stdout), wrap(stdio.Stderr)
	return stdio
}
