package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"time"

	"golang.org/x/sys/unix"
)

// A prepared (warm) sandbox is Start cut in two. Prepare does everything
// but the command: the init in its namespaces and cgroup, the root built,
// hostname and loopback, and the workload's process forked and walled
// (Landlock, no_new_privs, no capabilities, its user namespace, its
// process limit, seccomp), waiting (initproc's holdWorkload). Prepared.Start sends
// that process its command, environment and working directory with its
// stdin, stdout and stderr (SCM_RIGHTS); it looks the command up, changes
// directory and executes it. Every wall is the Spec's, up before the
// workload runs anything of its own; only what it runs arrives late,
// which is why a Spec may only be started in a sandbox prepared from an
// equal one (Matches).

// Prepared is a sandbox waiting for its workload.
type Prepared struct {
	sb   *Sandbox
	spec Spec
	key  string // warmKey(spec)
}

// Prepare builds a sandbox for spec up to its workload's command (see
// Start, whose errors it returns); spec.Args, Env and Dir are not used:
// Prepared.Start gives the workload's. Cancelling ctx kills it until
// Start re-arms the kill on its own context. Close a Prepared that is
// never started.
func Prepare(ctx context.Context, spec Spec) (*Prepared, error) {
	key := warmKey(spec)
	if key == "" {
		return nil, &StartError{Code: exitSetup, Err: errors.New("a sandbox with an ID or a network cannot be prepared")}
	}
	spec.hold = true
	sb, err := Start(ctx, spec, Stdio{})
	if err != nil {
		return nil, err
	}
	spec.hold = false
	// Nothing to clean up after until Start arms watch: Wait must not
	// wait for it.
	sb.cleaned = make(chan struct{})
	close(sb.cleaned)
	return &Prepared{sb: sb, spec: spec, key: key}, nil
}

// Matches reports whether a sandbox started from spec would be the one p
// holds: every field but the workload's Args, Env, Dir and the secrets
// it gets in its environment is equal, and spec names no ID of its own.
func (p *Prepared) Matches(spec Spec) bool {
	k := warmKey(spec)
	return k != "" && k == p.key
}

// warmKey is spec without what a prepared sandbox takes late, encoded: two
// Specs with one key build the same sandbox. It is "" for a Spec that
// cannot be prepared: one with an ID, or with a network, whose proxy
// reports to callbacks of its own sandbox.
func warmKey(spec Spec) string {
	n := spec.Network
	if spec.ID != "" || n.Enabled() || n.Log != nil || n.Opened != nil || n.Injector != nil ||
		n.CA != nil || n.Resolver != nil || n.TrustBundle != nil {
		return ""
	}
	// Secrets in the environment arrive with it; those in files are in
	// the root already.
	var files []Secret
	for _, s := range spec.Secrets {
		if s.AsFile {
			files = append(files, s)
		}
	}
	spec.Secrets = files
	// Every exported field but the workload's and the (empty) network's,
	// so that a field added to Spec joins the key by itself; an empty
	// slice is nil.
	fields := map[string]any{}
	v := reflect.ValueOf(spec)
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		switch {
		case !f.IsExported() || f.Name == "Args" || f.Name == "Env" || f.Name == "Dir" || f.Name == "Network":
		case fv.Kind() == reflect.Slice && fv.Len() == 0:
			fields[f.Name] = nil
		default:
			fields[f.Name] = fv.Interface()
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return ""
	}
	return string(b)
}

// ID is the sandbox's id.
func (p *Prepared) ID() string { return p.sb.ID }

// Start runs spec's workload in the prepared sandbox; spec must match
// (Matches). Cancelling ctx kills the sandbox from then on. Stdio may be
// any readers and writers, but not a terminal. On an error the sandbox
// is gone; p is spent either way.
//
// The claim goes straight to the workload's process, forked and walled
// while the sandbox was prepared (initproc's holdWorkload): its command, laid out
// for it with the candidate paths of its lookup, and its stdio. The init
// takes no part, and the start waits for two wake-ups: the child's, and
// ours once it has executed the command.
func (p *Prepared) Start(ctx context.Context, spec Spec, stdio Stdio) (*Sandbox, error) {
	return p.start(ctx, spec, warmKey(spec), stdio)
}

// start is Start for a spec whose warmKey is key.
func (p *Prepared) start(ctx context.Context, spec Spec, key string, stdio Stdio) (*Sandbox, error) {
	sb := p.sb
	fail := func(err error) (*Sandbox, error) {
		sb.dropWarm()
		sb.Kill()
		_, _ = sb.Wait()
		var se *StartError
		if !errors.As(err, &se) {
			err = &StartError{Code: exitSetup, Err: err}
		}
		return nil, err
	}
	if sb.ctl == nil {
		return nil, &StartError{Code: exitSetup, Err: errors.New("prepared sandbox started twice")}
	}
	if key == "" || key != p.key { // !p.Matches(spec)
		return fail(errors.New("the spec differs from the prepared sandbox's"))
	}
	if err := spec.check(); err != nil {
		return fail(err)
	}
	if foregroundTTY(stdio.Stdin) >= 0 {
		return fail(errors.New("a prepared sandbox cannot take a terminal"))
	}
	if spec.fileSizeLimit() > 0 {
		stdio = pipeRegularFiles(stdio) // as Start does
	}
	env, dir := spec.environ(), spec.workdir()
	cands, direct := lookCandidates(spec.Args[0], dir, env)
	msg, err := claimLayout(sb.claimBase, dir, spec.Args, env, cands, direct)
	if err != nil {
		return fail(err)
	}
	fds, err := sb.claimStdio(stdio)
	if err != nil {
		return fail(err)
	}
	err = unix.Sendmsg(int(sb.claim.Fd()), msg, unix.UnixRights(fds[0], fds[1], fds[2]), nil, unix.MSG_NOSIGNAL)
	for _, f := range fds {
		unix.Close(f)
	}
	if err != nil {
		return fail(fmt.Errorf("handing the workload its command: %w", err))
	}
	if err := sb.awaitExec(spec.Args[0], cands); err != nil {
		return fail(err)
	}
	sb.dropWarm()
	if ctx.Err() != nil {
		return fail(fmt.Errorf("starting sandbox: %w", context.Cause(ctx)))
	}
	sb.spec = spec
	sb.start = time.Now()
	sb.Prepared = true
	sb.stopCtx()
	sb.stopCtx = context.AfterFunc(ctx, sb.Kill)
	sb.watch(ctx)
	return sb, nil
}

// alive reports whether p still waits for its workload: neither its
// init's end of the control socket nor its workload's of the claim
// socket has hung up or sent anything (both are silent until the claim).
func (p *Prepared) alive() bool {
	if p.sb.ctl == nil {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(p.sb.ctl.Fd()), Events: unix.POLLIN}, {Fd: int32(p.sb.claim.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 0
}

// Close kills a prepared sandbox that was never started and waits for it.
func (p *Prepared) Close() {
	if p.sb.ctl == nil {
		return
	}
	p.sb.dropWarm()
	p.sb.Kill()
	_, _ = p.sb.Wait()
}

// dropWarm closes what a prepared sandbox keeps for its claim.
func (sb *Sandbox) dropWarm() {
	for _, f := range []**os.File{&sb.ctl, &sb.execR, &sb.claim} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// awaitReady reads the held init's report (readReport). Ready comes with
// the read end of the forked workload's report pipe and the host's end of
// its claim socket, and the address of its claim buffer; it keeps them,
// and a copy of the control socket, for Prepared.Start.
func (sb *Sandbox) awaitReady(ctl *os.File) error {
	bp := reportBufs.Get().(*[reportMax]byte)
	defer reportBufs.Put(bp)
	buf := bp[:]
	oob := make([]byte, unix.CmsgSpace(2*4))
	n, oobn, err := recvmsgWait(ctl, buf, oob, unix.MSG_CMSG_CLOEXEC)
	var fds []int
	if err == nil && oobn > 0 {
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if rights, rerr := unix.ParseUnixRights(&m); rerr == nil {
					fds = append(fds, rights...)
				}
			}
		}
	}
	if len(fds) == 2 {
		sb.execR, sb.claim = os.NewFile(uintptr(fds[0]), "exec-report"), os.NewFile(uintptr(fds[1]), "claim")
	} else {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	if err != nil || n == 0 {
		return &StartError{Code: exitSetup, Err: errors.New("sandbox init exited before starting the workload")}
	}
	r, err := decodeReport(buf[:n])
	if err != nil {
		return &StartError{Code: exitSetup, Err: fmt.Errorf("reading sandbox init report: %w", err)}
	}
	if !r.Ready {
		return &StartError{Layer: r.Layer, Code: r.Code, Err: errors.New(r.Error)}
	}
	if sb.claim == nil || r.ClaimBase == 0 {
		return &StartError{Code: exitSetup, Err: errors.New("the sandbox init reported ready without its workload's claim socket")}
	}
	sb.claimBase = uintptr(r.ClaimBase)
	fd, err := dupControl(ctl)
	if err != nil {
		return &StartError{Code: exitSetup, Err: fmt.Errorf("keeping the control socket: %w", err)}
	}
	sb.ctl = os.NewFile(uintptr(fd), "control")
	return nil
}

// awaitExec waits until the workload forked ahead has executed the
// command file (looked up among cands), or fails as a cold start would,
// with the same code and message. The report pipe ends empty once the
// command runs, or carries the failed step; the byte the child sends on
// the claim socket once it has found the command tells an execve from a
// child that died before it took the claim (with its sandbox).
func (sb *Sandbox) awaitExec(file string, cands []string) error {
	step, errno, err := readForkReport(sb.execR)
	if err != nil {
		return &StartError{Code: exitSetup, Err: err}
	}
	var w *workloadError
	switch step {
	case 0:
		var b [1]byte
		if n, _, err := unix.Recvfrom(int(sb.claim.Fd()), b[:], unix.MSG_DONTWAIT); n != 1 || err != nil {
			return &StartError{Code: exitSetup, Err: errors.New("sandbox init exited before starting the workload")}
		}
		return nil
	case stepLookup: // as lookPath's os.Stat
		w = commandError(&os.PathError{Op: "stat", Path: cands[0], Err: errno})
	case stepNotFound:
		w = commandError(notInPath(file))
	default:
		w = forkFailure(&workloadConfig{Args: []string{file}}, step, errno)
	}
	return &StartError{Layer: w.Layer, Code: w.Code, Err: errors.New(w.Msg)}
}

// claimStdio returns fds for the workload's stdin, stdout and stderr
// (the caller closes them): files as they are, /dev/null for nil, and a
// pipe pumped by a goroutine for any other reader or writer (Wait waits
// for the writers' pumps).
func (sb *Sandbox) claimStdio(stdio Stdio) (fds [3]int, err error) {
	stdio, stdinR := sb.pumpStdin(stdio)
	if stdinR != nil {
		defer stdinR.Close()
	}
	ends := [3]any{stdio.Stdin, stdio.Stdout, stdio.Stderr}
	for i := range fds {
		fds[i] = -1
	}
	defer func() {
		if err != nil {
			for _, fd := range fds {
				if fd >= 0 {
					unix.Close(fd)
				}
			}
		}
	}()
	for i, e := range ends {
		var f *os.File
		switch v := e.(type) {
		case *os.File:
			f = v
		case nil:
		case io.Writer:
			r, w, perr := os.Pipe()
			if perr != nil {
				return fds, perr
			}
			defer w.Close()
			sb.copies.Add(1)
			go func() {
				defer sb.copies.Done()
				defer r.Close()
				_, _ = io.Copy(v, r)
			}()
			f = w
		default:
			return fds, fmt.Errorf("stdio %d: a %T is neither a file nor a writer", i, e)
		}
		if f == nil {
			fds[i], err = unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
		} else {
			fds[i], err = unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		}
		if err != nil {
			return fds, fmt.Errorf("passing stdio %d: %w", i, err)
		}
	}
	return fds, nil
}
