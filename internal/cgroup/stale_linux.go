package cgroup

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
)

// staleGrace spares sandbox cgroups younger than this: another mcpbox
// sharing the parent cgroup may be between its Create and Add, a window
// of milliseconds; seconds leave room for a loaded host.
const staleGrace = 5 * time.Second

// CleanupStale removes leftover sandbox cgroups (mcpbox/<id> under
// mcpbox's parent cgroups) that hold no process and are older than
// staleGrace, typically left by a crashed gateway. A sandbox that is frozen
// and holds a task with SIGKILL pending (its gateway died while it was
// paused, and its parent-death signal waits for a thaw; see ThawFiles) is
// thawed, killed and removed too. Any other sandbox with a live process in
// any of its directories is left whole, as is anything outside mcpbox/ and
// any entry that is not a valid sandbox id. It returns the ids removed.
//
// It also looks into each sandbox cgroup for an mcpbox/<id> of its own:
// a cgroup v1 bug, fixed since, made sandboxes while mcpbox's thread was
// in another sandbox's cgroup, as mcpbox/<X>/mcpbox/<Y> in some
// hierarchies. Such a nested sandbox is judged by the same rules as the
// others, and before the one it is nested in, whose processes (as
// counted, recursively) it would otherwise include.
func CleanupStale() ([]string, error) {
	parents, err := parentDirs()
	if err != nil {
		return nil, err
	}
	return cleanupStale(parents, time.Now().Add(-staleGrace))
}

// parentDirs lists the mcpbox directories sandbox cgroups live in.
func parentDirs() ([]string, error) {
	switch version() {
	case "v2":
		base, err := v2Base(v2Root)
		if err != nil {
			return nil, fmt.Errorf("finding stale cgroups: %w", err)
		}
		return []string{filepath.Join(base, parentName)}, nil
	case "v1", "hybrid":
		// One read of where this thread is, for every hierarchy, as
		// createV1 does (issue 19: every sandbox start sweeps).
		own, err := cgroups.ParseCgroupFile(ownCgroupFile)
		if err != nil {
			return nil, fmt.Errorf("finding stale cgroups: %w", err)
		}
		var parents []string
		for _, ctrl := range v1Controllers {
			if p, _, err := v1ParentOf(own, ctrl); err == nil && !slices.Contains(parents, p) {
				parents = append(parents, p)
			}
		}
		return parents, nil
	}
	return nil, fmt.Errorf("finding stale cgroups: no cgroup file system mounted: %w", ErrUnsupported)
}

// maxNesting bounds how many sandbox cgroups deep cleanupStale looks for
// nested ones (CleanupStale); the bug made one level per sandbox started
// from within another's cgroup, and a few levels cover any leftover.
const maxNesting = 4

// cleanupStale removes the sandboxes under parents, or nested in one
// (CleanupStale), that are idle and were created before cutoff.
func cleanupStale(parents []string, cutoff time.Time) ([]string, error) {
	var errs []error
	depth := map[string]int{} // id -> how deep its deepest directory is nested
	type parent struct {
		dir   string
		depth int
	}
	queue := make([]parent, 0, len(parents))
	for _, p := range parents {
		queue = append(queue, parent{p, 0})
	}
	for i := 0; i < len(queue); i++ {
		p := queue[i]
		ents, err := os.ReadDir(p.dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("finding stale cgroups: %w", err))
			continue
		}
		for _, e := range ents {
			if !e.IsDir() || validateID(e.Name()) != nil {
				continue
			}
			if d, ok := depth[e.Name()]; !ok || p.depth > d {
				depth[e.Name()] = p.depth
			}
			nested := filepath.Join(p.dir, e.Name(), parentName)
			if fi, err := os.Lstat(nested); err == nil && fi.IsDir() && p.depth < maxNesting {
				queue = append(queue, parent{nested, p.depth + 1})
			}
		}
	}
	ids := make([]string, 0, len(depth))
	for id := range depth {
		ids = append(ids, id)
	}
	// The most deeply nested first: a sandbox's cgroup can go only once
	// those nested in it are gone.
	slices.SortFunc(ids, func(a, b string) int {
		if c := cmp.Compare(depth[b], depth[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})

	var removed []string
	for _, id := range ids {
		// One directory per hierarchy, nested or not: the bug nested a
		// sandbox in some hierarchies only.
		var dirs []string
		for _, p := range queue {
			if d := filepath.Join(p.dir, id); !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
		young, busy, err := inUse(dirs, cutoff)
		if err != nil {
			errs = append(errs, fmt.Errorf("checking stale cgroup %s: %w", id, err))
			continue
		}
		if young {
			// Another mcpbox may be between creating it and moving its
			// sandbox in; a frozen one is reclaimed once past the grace
			// too, since its tasks cannot die meanwhile and its creator
			// (or a test) may still be looking at it.
			continue
		}
		if busy {
			if !abandoned(dirs) {
				continue
			}
			if err := reclaim(dirs); err != nil {
				errs = append(errs, fmt.Errorf("reclaiming frozen cgroup %s: %w", id, err))
				continue
			}
		}
		ok := true
		for _, d := range dirs {
			// rmdir of a cgroup that gained a process meanwhile fails
			// with EBUSY, so a race can't remove a live sandbox.
			if err := cgroups.RemovePath(d); err != nil {
				ok = false
				errs = append(errs, fmt.Errorf("removing stale cgroup %s: %w", d, err))
			}
		}
		if ok {
			removed = append(removed, id)
		}
	}
	return removed, errors.Join(errs...)
}

// inUse reports whether any of dirs was created after cutoff (young) or
// holds a process, here or in a descendant (busy); missing dirs count as
// neither. A young sandbox is skipped whatever it holds, so busy is not
// looked at then; else the first process found answers. Every sandbox
// start sweeps while its workload runs and finds its own cgroup, young,
// and every running sandbox's on the host (issue 19: 5 stats instead of 5
// stats and 5 directory walks for its own, one read instead of 5 walks
// for a running one).
func inUse(dirs []string, cutoff time.Time) (young, busy bool, err error) {
	present := make([]string, 0, len(dirs))
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, true, err
		}
		if fi.ModTime().After(cutoff) {
			return true, false, nil
		}
		present = append(present, d)
	}
	for _, d := range present {
		busy, err := hasProcess(d)
		if err != nil || busy {
			return false, true, err
		}
	}
	return false, false, nil
}

// hasProcess reports whether dir or a descendant holds a process. The
// dir's own cgroup.procs first: a running sandbox's processes are there,
// and reading it spares the walk over every file of every descendant.
func hasProcess(dir string) (bool, error) {
	if procs, err := cgroups.ReadFile(dir, "cgroup.procs"); err == nil && strings.TrimSpace(procs) != "" {
		return true, nil
	}
	pids, err := readPids(dir)
	return len(pids) > 0, err
}
