//go:build linux && !amd64

package initproc

// startCold starts the workload of a cold start. Only amd64 has the
// clone that shares the init's address space (vfork_unsafe.go);
// elsewhere the walled thread forks a copy.
func startCold(c *workloadConfig) (int, *workloadError) { return startWalled(c) }

// forksInPlace tells whether startCold forks the workload without a
// walled thread.
const forksInPlace = false
