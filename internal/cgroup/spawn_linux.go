package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// Moving a running process between cgroups (Add) write-locks the global
// threadgroup rwsem, which on first use waits for an RCU grace period:
// ~5–11 ms on a 2-core host, paid while the sandbox waits. A process born
// in the cgroup needs no move. On v2 the clone puts it there itself
// (CLONE_INTO_CGROUP with the fd of DirFD). On v1 a thread may move itself
// alone, through the hierarchy's tasks file and pid 0: the kernel skips
// the global lock for that case (the thread cannot exit or exec under the
// write), so the move costs microseconds; the child it forks inherits the
// thread's cgroups, and the thread then moves back.

// SpawnInside runs start with the calling OS thread inside the cgroup, so
// that the processes start forks are born there, and moves the thread
// back to where it was. It is for cgroup v1; on v2 it returns an error
// wrapping ErrUnsupported without running start (use DirFD).
//
// If the thread cannot move in, start does not run and the error says why;
// the caller can still start the process outside and Add it. If the thread
// cannot move back, SpawnInside panics: a thread of the caller's left in
// the sandbox's cgroup would share its limits and die with it (Kill lists
// the thread's whole process), and no caller could recover from that.
//
// Preconditions: the calling goroutine is locked to its OS thread (a
// thread Go reuses for other goroutines would carry them in).
func (c *Cgroup) SpawnInside(start func() error) error {
	b, ok := c.b.(*v1)
	if !ok {
		return fmt.Errorf("spawning inside cgroup %s: not cgroup v1: %w", c.id, ErrUnsupported)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	into, back, err := b.threadFiles()
	if err != nil {
		return fmt.Errorf("spawning inside cgroup %s: %w", c.id, err)
	}
	defer closeAll(into)
	defer closeAll(back)
	if err := moveThread(into); err != nil {
		if berr := moveThread(back); berr != nil {
			panic(fmt.Sprintf("cgroup: moving spawn thread back from %s: %v", c.id, berr))
		}
		return fmt.Errorf("spawning inside cgroup %s: %w", c.id, err)
	}
	err = start()
	if berr := moveThread(back); berr != nil {
		panic(fmt.Sprintf("cgroup: moving spawn thread back from %s: %v", c.id, berr))
	}
	return err
}

// threadFiles opens, for writing, the tasks file of each of the cgroup's
// directories and of the process's own cgroup in the same hierarchy, the
// one the directory was made under (<own>/mcpbox/<id>). Opened up front, a
// missing permission shows before the thread has moved anywhere. A thread
// that is not where its process is (moved alone by someone), or not where
// the directory was made, is refused: SpawnInside could not put it back
// where it was.
func (b *v1) threadFiles() (into, back []*os.File, err error) {
	self, err := cgroups.ParseCgroupFile("/proc/self/cgroup")
	if err != nil {
		return nil, nil, err
	}
	thread, err := cgroups.ParseCgroupFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) ([]*os.File, []*os.File, error) {
		closeAll(into)
		closeAll(back)
		return nil, nil, err
	}
	var done []string
	for _, ctrl := range v1Controllers {
		dir, ok := b.paths[ctrl]
		if !ok || slices.Contains(done, dir) { // co-mounted, e.g. cpu,cpuacct
			continue
		}
		done = append(done, dir)
		if self[ctrl] == "" || thread[ctrl] != self[ctrl] {
			return fail(fmt.Errorf("the calling thread is in %s cgroup %q, its process in %q", ctrl, thread[ctrl], self[ctrl]))
		}
		// Back, where the directory was made, is where the thread is: a
		// cgroup made elsewhere (in a sandbox's, see ownCgroupFile) would
		// leave it there.
		if thread[ctrl] != b.homes[ctrl] {
			return fail(fmt.Errorf("the calling thread is in %s cgroup %q, and %s was made under %q", ctrl, thread[ctrl], dir, b.homes[ctrl]))
		}
		own := filepath.Dir(filepath.Dir(dir))
		for _, p := range []struct {
			dir  string
			list *[]*os.File
		}{{dir, &into}, {own, &back}} {
			f, err := os.OpenFile(filepath.Join(p.dir, "tasks"), os.O_WRONLY, 0)
			if err != nil {
				return fail(err)
			}
			*p.list = append(*p.list, f)
		}
	}
	return into, back, nil
}

// moveThread moves the calling thread alone into the cgroup of each
// tasks file: "0" names the writer itself.
func moveThread(tasks []*os.File) error {
	var errs []error
	for _, f := range tasks {
		if _, err := unix.Write(int(f.Fd()), []byte("0")); err != nil {
			errs = append(errs, fmt.Errorf("moving thread into %s: %w", filepath.Dir(f.Name()), err))
		}
	}
	return errors.Join(errs...)
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// DirFD opens the cgroup's directory (the init's, with a workload cgroup)
// for CLONE_INTO_CGROUP
// (syscall.SysProcAttr.CgroupFD), which starts a process inside it. It is
// for cgroup v2; on v1 it returns an error wrapping ErrUnsupported (use
// SpawnInside). The caller closes the file.
func (c *Cgroup) DirFD() (*os.File, error) {
	b, ok := c.b.(*v2)
	if !ok {
		return nil, fmt.Errorf("opening cgroup %s for clone: not cgroup v2: %w", c.id, ErrUnsupported)
	}
	dir := b.dir
	if b.initDir != "" {
		dir = b.initDir
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup %s for clone: %w", c.id, err)
	}
	return f, nil
}
