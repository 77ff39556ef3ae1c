package admin

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"mcpbox/internal/approval"
	"mcpbox/internal/instance"
)

// AllStateDirs, as a Client's state dir, stands for every registered
// state dir (--all): a request reaches every instance of each.
const AllStateDirs = "\x00all"

// Client sends admin requests to the instances running on one state dir
// (or on several: StateDirs, AllStateDirs).
// A request about one thing (a sandbox, an approval) goes to each
// instance until one knows it; a listing gathers every instance's answer;
// a change (trust, reload, rotate) reaches all.
type Client struct {
	// StateDir is the state dir whose instances answer, or AllStateDirs.
	StateDir string
	// StateDirs, if set instead, are several state dirs whose instances
	// answer: a listing, or a request about one sandbox, in a directory
	// where instances of several configs run (Listing).
	StateDirs []string
	// PID, if not 0, is the one instance that answers (mcpbox ui
	// --instance); the others are not asked.
	PID int
	// Self, if not 0, is the caller's own instance, which is not asked: a
	// dashboard asking about what waits at the others.
	Self int
}

// Approvals is the pending requests and remembered decisions.
type Approvals struct {
	Pending    []approval.Request
	Remembered []approval.Remembered
	// Where names, when several instances answered (--all, or instances
	// of several configs), the instance holding each pending request by
	// its ID: "PROJECT (pid N)".
	Where map[string]string
}

// Approvals lists the pending requests and remembered decisions.
func (c Client) Approvals() (Approvals, error) {
	r, err := c.gather(request{Op: opApprovals})
	return Approvals{Pending: r.Pending, Remembered: r.Remembered, Where: r.where}, err
}

// Decide allows or denies the pending request id for scope (once,
// session or always; "" is once), and returns the request as the
// instance listed it (its ID alone if it no longer did).
func (c Client) Decide(id string, allow bool, scope string) (approval.Request, error) {
	return c.DecideFor(id, allow, scope, "", "")
}

// DecideFor is Decide passed on for by, who asked the caller in its
// channel via (a dashboard's user, "web"): the instance records the
// decision as the caller's for them, and takes it only if its channels
// allow via as well as the cli.
func (c Client) DecideFor(id string, allow bool, scope, via, by string) (approval.Request, error) {
	r, err := c.one(request{Op: opDecide, ID: id, Allow: allow, Scope: scope, Via: via, For: by})
	if err != nil || len(r.Pending) != 1 {
		return approval.Request{ID: id}, err
	}
	return r.Pending[0], nil
}

// Revoke forgets the remembered decision id.
func (c Client) Revoke(id string) error {
	_, err := c.one(request{Op: opRevoke, ID: id})
	return err
}

// Pins lists the pending definition changes of server ("" for all).
func (c Client) Pins(server string) ([]PinChange, error) {
	r, err := c.gather(request{Op: opPins, Server: server})
	return r.Changes, err
}

// Trust accepts the pending changes of server (key "" for all) whose new
// hashes are among hashes, and returns the changes trusted.
func (c Client) Trust(server, key string, hashes []string) ([]PinChange, error) {
	r, err := c.gather(request{Op: opTrust, Server: server, Key: key, Hashes: hashes})
	return r.Changes, err
}

// Reload makes every instance reread the lock file.
func (c Client) Reload() error {
	_, err := c.gather(request{Op: opReload})
	return err
}

// Control pauses, resumes or stops (op "pause", "resume", "stop") the
// sandbox id.
func (c Client) Control(op, id string) error {
	switch op {
	case opPause, opResume, opStop:
	default:
		return fmt.Errorf("unknown sandbox operation %q", op)
	}
	_, err := c.one(request{Op: op, ID: id})
	return err
}

// Snapshot writes the output of the sandbox id to the file path (as the
// gateway sees it: absolute).
func (c Client) Snapshot(id, path string) error {
	_, err := c.one(request{Op: opSnapshot, ID: id, Path: path})
	return err
}

// SnapshotPath is where `mcpbox snapshot ID` writes when given no file:
// STATE_DIR/snapshots/ID-TIME.tar.gz, the dir made (0700) under c's state
// dir or, for AllStateDirs and StateDirs, under that of the instance that
// runs id.
func (c Client) SnapshotPath(id string, now time.Time) (string, error) {
	dir := c.StateDir
	if dir == AllStateDirs || len(c.StateDirs) > 0 {
		if dir = c.StateDirOf(id); dir == "" {
			return "", fmt.Errorf("no running mcpbox serve of this user has sandbox %s (mcpbox ps --all lists them)", id)
		}
	}
	snaps := filepath.Join(dir, "snapshots")
	if err := os.MkdirAll(snaps, 0o700); err != nil {
		return "", err
	}
	return filepath.Join(snaps, fmt.Sprintf("%s-%s.tar.gz", id, now.UTC().Format("20060102T150405Z"))), nil
}

// Diff is the input source and overlay upper dir of the sandbox id.
func (c Client) Diff(id string) (lower, upper string, err error) {
	r, err := c.one(request{Op: opDiff, ID: id})
	return r.Lower, r.Upper, err
}

// Rotated is what a rotation renewed.
type Rotated struct {
	Servers   []string // the servers that declare the secret
	Instances int      // their sandboxes renewed
}

// Rotate renews the sandboxes of every server declaring secret (NAME or
// SERVER/NAME).
func (c Client) Rotate(secret string) (Rotated, error) {
	r, err := c.gather(request{Op: opRotate, Secret: secret})
	return Rotated{Servers: r.Servers, Instances: r.Instances}, err
}

// View is one instance with its sandboxes, as `mcpbox ps` shows it.
type View struct {
	Record    instance.Record
	Sandboxes []Sandbox // each with Instance and Project set
	Err       error     // the instance did not answer
}

// StateDirOf is the state dir of the instance that has sandbox id
// (running or recently ended), for a command given --all that writes
// under it; "" if none has.
func (c Client) StateDirOf(id string) string {
	views, _ := c.Views()
	for _, v := range views {
		for _, s := range v.Sandboxes {
			if s.ID == id && id != "" { // "": a remote server's connection
				return v.Record.StateDir
			}
		}
	}
	return ""
}

// Views asks every instance for its sandboxes; an instance that does not
// answer is a View with Err.
func (c Client) Views() ([]View, error) {
	recs, err := c.instances()
	if err != nil {
		return nil, err
	}
	views := make([]View, 0, len(recs))
	for i, a := range askEach(recs, request{Op: opPS}) {
		r := recs[i]
		v := View{Record: r, Err: a.err}
		for _, row := range a.rep.Sandboxes {
			row.Instance, row.Project = r.PID, r.Project
			v.Sandboxes = append(v.Sandboxes, row)
		}
		views = append(views, v)
	}
	return views, nil
}

// answer is one instance's reply to a request, or why there is none.
type answer struct {
	rep reply
	err error
}

// askEach sends req to every instance at once, so that one that does
// not answer (stopped by SIGSTOP, stuck) delays the others by nothing;
// the answers are in the order of recs.
func askEach(recs []instance.Record, req request) []answer {
	out := make([]answer, len(recs))
	var wg sync.WaitGroup
	for i, r := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].rep, out[i].err = callSocket(r.StateDir, r.Socket(), req)
		}()
	}
	wg.Wait()
	return out
}

// ErrNoInstance is the error of a request to a state dir on which no
// serve runs.
var ErrNoInstance = errors.New("no mcpbox serve is running")

// instances lists the live instances, at least one.
func (c Client) instances() ([]instance.Record, error) {
	dirs := c.StateDirs
	if len(dirs) == 0 {
		dirs = []string{c.StateDir}
	}
	var recs []instance.Record
	for _, dir := range dirs {
		more, err := instancesFor(dir)
		if err != nil {
			return nil, err
		}
		for _, r := range more {
			// One dir under two spellings (a link) lists its instances
			// once.
			if !slices.ContainsFunc(recs, func(o instance.Record) bool { return o.PID == r.PID && o.Started.Equal(r.Started) }) {
				recs = append(recs, r)
			}
		}
	}
	if c.Self != 0 {
		recs = slices.DeleteFunc(recs, func(r instance.Record) bool { return r.PID == c.Self })
	}
	if c.PID != 0 {
		recs = slices.DeleteFunc(recs, func(r instance.Record) bool { return r.PID != c.PID })
		if len(recs) == 0 {
			return nil, fmt.Errorf("no mcpbox serve with pid %d is running on %s (mcpbox ps --instances lists them)", c.PID, c.where())
		}
	}
	if len(recs) == 0 {
		if c.StateDir == AllStateDirs {
			return nil, ErrNoInstance
		}
		hint := ""
		if c.Self == 0 { // a command's, not a serve reaching its siblings (its dashboard, every few seconds)
			hint = elsewhere(dirs)
		}
		return nil, fmt.Errorf("%w on the state dir %s%s", ErrNoInstance, c.where(), hint)
	}
	return recs, nil
}

// elsewhere tells, for an error that no serve runs on dirs, of the
// serves of this user that run on other state dirs: a person in a
// directory that a past run made a project of may look for a call that
// waits in another project's serve.
func elsewhere(dirs []string) string {
	all, _ := instancesFor(AllStateDirs)
	var projects []string
	for _, r := range all {
		if !slices.Contains(dirs, r.StateDir) && !slices.Contains(projects, r.Project) {
			projects = append(projects, r.Project)
		}
	}
	n := len(projects)
	switch {
	case n == 0:
		return ""
	case n > 3:
		projects = projects[:3]
	}
	for i, p := range projects {
		projects[i] = OneLine(p, 80) // the record's, which its state dir's writers wrote
	}
	if n == 1 {
		return fmt.Sprintf(" (one runs for %s: --all reaches it)", projects[0])
	}
	list := strings.Join(projects, ", ")
	if n > 3 {
		list += ", ..."
	}
	return fmt.Sprintf(" (serves run for %d other projects, %s: --all reaches them)", n, list)
}

// where names c's state dir, or its state dirs, in an error.
func (c Client) where() string {
	return cmp.Or(c.StateDir, strings.Join(c.StateDirs, " or "))
}

// one sends a request about one thing to each instance until one takes
// it; if none does, the owner's error (ownerError).
func (c Client) one(req request) (reply, error) {
	recs, err := c.instances()
	if err != nil {
		return reply{}, err
	}
	if len(recs) == 1 {
		return callSocket(recs[0].StateDir, recs[0].Socket(), req)
	}
	var errs []error
	for _, r := range recs {
		rep, err := callSocket(r.StateDir, r.Socket(), req)
		if err == nil {
			return rep, nil
		}
		errs = append(errs, fmt.Errorf("instance %d (%s): %w", r.PID, cell(r.Project), err))
	}
	return reply{}, ownerError(errs)
}

// gather sends a listing or a change to every instance and merges their
// answers; it fails only if no instance answered.
func (c Client) gather(req request) (reply, error) {
	recs, err := c.instances()
	if err != nil {
		return reply{}, err
	}
	if len(recs) == 1 && c.Self == 0 {
		return callSocket(recs[0].StateDir, recs[0].Socket(), req)
	}
	out := reply{OK: true}
	var errs []error
	for i, a := range askEach(recs, req) {
		if a.err != nil {
			errs = append(errs, fmt.Errorf("instance %d (%s): %w", recs[i].PID, cell(recs[i].Project), a.err))
			continue
		}
		merge(&out, a.rep)
		for _, p := range a.rep.Pending {
			if out.where == nil {
				out.where = map[string]string{}
			}
			out.where[p.ID] = fmt.Sprintf("%s (pid %d)", recs[i].Project, recs[i].PID)
		}
	}
	if len(errs) == len(recs) {
		return out, errors.Join(errs...)
	}
	return out, nil
}

// merge adds rep (one instance's answer to a listing or a change) to
// out, each pending change and remembered decision once.
func merge(out *reply, rep reply) {
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
		if !slices.ContainsFunc(out.Changes, func(o PinChange) bool {
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
		if !strings.Contains(msg, "no sandbox") && !strings.Contains(msg, "no such approval") && !strings.Contains(msg, "already decided") && !strings.Contains(msg, "held by another instance") {
			return err
		}
	}
	return errs[0]
}

// listingWait bounds how long a listing may take an instance to answer:
// it reads what the instance holds, so a longer wait means the instance
// is stopped or stuck, and `ps --all` must not wait minutes for it.
var listingWait = 10 * time.Second

// answerWait is how long callSocket waits for the answer to op: a
// listing's listingWait; a change may start sandboxes (a renewal, a
// resume), which takes longer.
func answerWait(op string) time.Duration {
	switch op {
	case opPS, opStats, opApprovals, opPins:
		return listingWait
	}
	return 2 * time.Minute
}

// callSocket sends one request to the instance answering on sock in the
// state dir dir.
func callSocket(dir, sock string, req request) (reply, error) {
	conn, err := instance.Dial(sock, 5*time.Second)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return reply{}, fmt.Errorf("%w on the state dir %s", ErrNoInstance, dir)
		}
		return reply{}, err
	}
	defer conn.Close()
	// Whoever answers must be this user (or root), outside any sandbox:
	// not a socket another user, or a sandbox that can write the state
	// dir, left where we were pointed.
	if !instance.Serves(conn, dir) {
		return reply{}, fmt.Errorf("the admin socket in %s is not this user's gateway", dir)
	}
	wait := answerWait(req.Op)
	conn.SetDeadline(time.Now().Add(wait))
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return reply{}, err
	}
	var r reply
	if err := json.NewDecoder(conn).Decode(&r); errors.Is(err, os.ErrDeadlineExceeded) {
		return reply{}, fmt.Errorf("no answer in %v: stopped or stuck", wait)
	} else if err != nil {
		return reply{}, fmt.Errorf("reading the gateway's answer: %w", err)
	}
	if r.Error != "" {
		return r, errors.New(r.Error)
	}
	return r, nil
}
