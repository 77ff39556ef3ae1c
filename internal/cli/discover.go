package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"mcpbox/internal/approval"
	"mcpbox/internal/instance"
	"mcpbox/internal/specconv"
)

// allStateDirs stands for every registered state dir where adminFlags
// return a dir (--all); adminCall reaches every instance of each.
const allStateDirs = "\x00all"

// projectConfigs are the config file names an admin command looks for in
// the current directory and its parents.
var projectConfigs = []string{"mcpbox.yaml", "mcpbox.yml"}

// findStateDir is the state dir of the project the directory wd is in,
// for admin commands given neither --config nor --state-dir. From wd up
// to /, each directory's mcpbox.yaml (its state_dir, or its project state
// dir) and the embedded default's project state dir for that directory
// are candidates; the first with a live instance wins. With none live,
// the nearest candidate that exists (a stopped project's audit log is
// still read).
func findStateDir(wd string) (string, error) {
	var existing []string
	for d := wd; ; d = filepath.Dir(d) {
		for _, cand := range stateDirCandidates(d) {
			if recs, _ := instance.List(cand); len(recs) > 0 {
				return cand, nil
			}
			if fi, err := os.Stat(cand); err == nil && fi.IsDir() {
				existing = append(existing, cand)
			}
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if len(existing) > 0 {
		return existing[0], nil
	}
	return "", fmt.Errorf("no mcpbox serve has run for %s or a parent directory: run the command in the project, or pass --config FILE or --state-dir DIR (mcpbox ps --all lists every running instance)", wd)
}

// stateDirCandidates are the state dirs a project in dir may use,
// without creating them: its config's, then the embedded default's.
func stateDirCandidates(dir string) []string {
	var out []string
	for _, name := range projectConfigs {
		path := filepath.Join(dir, name)
		// Only the user's own (or root's) config: a parent dir such as
		// /tmp may hold one another user planted.
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || !ownedByMe(fi) {
			continue
		}
		c, err := loadConfig(path)
		if err != nil {
			continue
		}
		if c.StateDir != "" {
			if sd, err := filepath.Abs(specconv.Resolve(dir, c.StateDir)); err == nil {
				out = append(out, sd)
			}
		} else if sd, err := projectStateDir(path, dir); err == nil {
			out = append(out, sd)
		}
	}
	if sd, err := projectStateDir("", dir); err == nil {
		out = append(out, sd)
	}
	return out
}

// instancesFor lists the live instances of dir, or of every registered
// state dir for allStateDirs.
func instancesFor(dir string) ([]instance.Record, error) {
	if dir != allStateDirs {
		return instance.List(dir)
	}
	root, err := instance.Root()
	if err != nil {
		return nil, err
	}
	return instance.All(root)
}

// adminCall sends req to the instances running on dir (allStateDirs:
// every instance of the user). A request about one thing (a sandbox, an
// approval) goes to each until one knows it; a listing gathers every
// instance's answer; a change (trust, reload, rotate) reaches all.
func adminCall(dir string, req adminRequest) (adminReply, error) {
	recs, err := instancesFor(dir)
	if err != nil {
		return adminReply{}, err
	}
	if len(recs) == 0 {
		if dir == allStateDirs {
			return adminReply{}, errors.New("no mcpbox serve is running")
		}
		return adminReply{}, fmt.Errorf("no mcpbox serve is running on the state dir %s", dir)
	}
	if len(recs) == 1 {
		return adminCallSocket(recs[0].StateDir, recs[0].Socket(), req)
	}
	var (
		out  = adminReply{OK: true}
		errs []error
		oks  int
	)
	for _, r := range recs {
		rep, err := adminCallSocket(r.StateDir, r.Socket(), req)
		if err != nil {
			errs = append(errs, fmt.Errorf("instance %d (%s): %w", r.PID, r.Project, err))
			continue
		}
		oks++
		switch req.Op {
		case "decide", "revoke", "pause", "resume", "stop", "snapshot", "diff":
			return rep, nil
		}
		mergeReply(&out, rep)
	}
	switch req.Op {
	case "decide", "revoke", "pause", "resume", "stop", "snapshot", "diff":
		return adminReply{}, ownerError(errs)
	case "trust", "reload", "rotate":
		if len(errs) > 0 && oks == 0 {
			return out, errors.Join(errs...)
		}
	default:
		if oks == 0 {
			return out, errors.Join(errs...)
		}
	}
	return out, nil
}

// mergeReply adds rep (one instance's answer to a listing or a change)
// to out, each pending change and remembered decision once.
func mergeReply(out *adminReply, rep adminReply) {
	for _, s := range rep.Servers {
		if !slices.Contains(out.Servers, s) {
			out.Servers = append(out.Servers, s)
		}
	}
	out.Instances += rep.Instances
	out.Pending = append(out.Pending, rep.Pending...)
	out.Sandboxes = append(out.Sandboxes, rep.Sandboxes...)
	for _, m := range rep.Remembered {
		if !slices.ContainsFunc(out.Remembered, func(o approval.Remembered) bool { return o.ID == m.ID }) {
			out.Remembered = append(out.Remembered, m)
		}
	}
	for _, c := range rep.Changes {
		if !slices.ContainsFunc(out.Changes, func(o pinChange) bool {
			return o.Server == c.Server && o.Kind == c.Kind && o.Key == c.Key && o.NewHash == c.NewHash
		}) {
			out.Changes = append(out.Changes, c)
		}
	}
}

// ownerError is the error to show when no instance took a request about
// one thing: the owner's, if one said more than that it does not know it.
func ownerError(errs []error) error {
	for _, err := range errs {
		msg := err.Error()
		if !strings.Contains(msg, "no sandbox") && !strings.Contains(msg, "no such approval") && !strings.Contains(msg, "already decided") {
			return err
		}
	}
	return errs[0]
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ownedByMe reports whether fi belongs to this user or root.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && (st.Uid == 0 || int(st.Uid) == os.Geteuid())
}
