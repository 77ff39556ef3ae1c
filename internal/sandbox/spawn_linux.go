package sandbox

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// The sandbox init is started with PDEATHSIG SIGKILL, so that it dies with
// mcpbox even when mcpbox is SIGKILLed, and the kernel then kills the rest
// of the sandbox's pid namespace. But the kernel sends that signal when the
// thread that forked the init exits, not the process: Go ends an OS thread
// whenever a goroutine that locked it returns still locked (asHostID on a
// failed restore, a library's per-thread setup), which would kill every
// sandbox forked from that thread with it. So every child with PDEATHSIG
// is forked from one thread, locked for the life of the process: the
// signal then comes when, and only when, mcpbox dies.
//
// The thread costs nothing between starts; forks are serialized anyway
// (syscall.ForkLock).
var (
	spawnOnce sync.Once
	spawnReqs chan func()
)

// onSpawnThread runs start on the spawn thread and returns its error.
// start must not block for long: every sandbox start waits for it.
func onSpawnThread(start func() error) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan func())
		go spawnLoop(spawnReqs)
	})
	done := make(chan error, 1)
	spawnReqs <- func() { done <- start() }
	return <-done
}

// spawnLoop runs the requests on its own thread. Never unlocked, and it
// never returns: the thread lives as long as the process.
//
// Not on the main thread, which Go hands to goroutines like any other:
// the thread group leader's cgroups are the ones /proc/PID/cgroup shows
// and, on cgroup v1, the memory cgroup the whole process's memory is
// charged to (the mm's owner); the spawn thread stands in a sandbox's
// cgroups for each fork (cgroup.SpawnInside), which would charge the
// gateway's allocations meanwhile to the sandbox, under its limit, and
// make the gateway a candidate of the sandbox's OOM kills. Given the main
// thread, spawnLoop keeps it, idle, and goes on from another.
func spawnLoop(reqs <-chan func()) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		go spawnLoop(reqs)
		select {}
	}
	for f := range reqs {
		f()
	}
}
