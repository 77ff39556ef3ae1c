package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
)

// A frozen sandbox does not die with its gateway on cgroup v1: the init's
// parent-death SIGKILL is queued on a task the freezer holds, and a v1
// frozen task acts on no signal until it is thawed. (On v2 a frozen task
// dies of SIGKILL, so the kernel ends a paused sandbox with its gateway.)
// Two things make sure nothing survives: ThawFiles tells a process outside
// the sandbox what to write when the gateway dies (package sandbox keeps
// such a guard), and CleanupStale thaws and removes what was left when the
// guard died too: a frozen sandbox cgroup holding a task with SIGKILL
// pending was told to die and cannot, so it is reclaimed.

// ThawFiles returns the files that thaw this cgroup when "THAWED" (v1
// freezer.state) or "0" (v2 cgroup.freeze) is written to them, for a
// process that must thaw it after mcpbox has died. It is empty where a
// frozen task dies of SIGKILL anyway (v2) or there is no freezer.
func (c *Cgroup) ThawFiles() []string {
	if b, ok := c.b.(*v1); ok {
		if dir, ok := b.paths["freezer"]; ok {
			return []string{filepath.Join(dir, "freezer.state")}
		}
	}
	return nil
}

// ThawFile thaws the cgroup whose state file is path, as ThawFiles
// returned it: the one write a guard makes once mcpbox is gone.
func ThawFile(path string) error {
	var value string
	switch filepath.Base(path) {
	case "freezer.state":
		value = "THAWED"
	case "cgroup.freeze":
		value = "0"
	default:
		return fmt.Errorf("thawing %s: not a freezer file", path)
	}
	if err := os.WriteFile(path, []byte(value), 0); err != nil {
		return fmt.Errorf("thawing %s: %w", filepath.Dir(path), err)
	}
	return nil
}

// abandoned reports whether the sandbox cgroup dirs (one per hierarchy)
// are frozen and hold a task with SIGKILL pending.
func abandoned(dirs []string) bool {
	frozen := false
	for _, d := range dirs {
		if isFrozen(d) {
			frozen = true
		}
	}
	if !frozen {
		return false
	}
	for _, d := range dirs {
		pids, _ := readPids(d)
		for _, pid := range pids {
			if killPending(pid) {
				return true
			}
		}
	}
	return false
}

// isFrozen reports whether dir is a v1 freezer cgroup that is frozen or
// freezing, or a v2 cgroup asked to freeze.
func isFrozen(dir string) bool {
	if b, err := os.ReadFile(filepath.Join(dir, "freezer.state")); err == nil {
		s := strings.TrimSpace(string(b))
		return s == string(cgroups.Frozen) || s == "FREEZING"
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.freeze"))
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// killPending reports whether pid has SIGKILL pending, for the thread or
// the process (/proc/PID/status SigPnd, ShdPnd).
func killPending(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(k) != "SigPnd" && string(k) != "ShdPnd") {
			continue
		}
		mask, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
		if err == nil && mask&(1<<(9-1)) != 0 { // SIGKILL is signal 9
			return true
		}
	}
	return false
}

// reclaim thaws an abandoned sandbox's cgroup dirs, so that the SIGKILL
// its tasks hold acts, kills whatever is left and waits up to killTimeout
// for them to be empty. The caller removes the dirs.
func reclaim(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		for _, f := range []string{"freezer.state", "cgroup.freeze"} {
			if p := filepath.Join(d, f); cgroups.PathExists(p) {
				errs = append(errs, ThawFile(p))
			}
		}
	}
	list := func() ([]int, error) {
		var all []int
		for _, d := range dirs {
			pids, err := readPids(d)
			if err != nil {
				return nil, err
			}
			all = append(all, pids...)
		}
		return all, nil
	}
	deadline := time.Now().Add(killTimeout)
	for {
		left, err := list()
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if len(left) == 0 {
			return errors.Join(errs...)
		}
		if time.Now().After(deadline) {
			return errors.Join(append(errs, fmt.Errorf("reclaiming frozen sandbox: %d processes left after %v", len(left), killTimeout))...)
		}
		if err := killPids(left, list); err != nil {
			errs = append(errs, err)
		}
		time.Sleep(killPoll)
	}
}
