package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"mcpbox/internal/audit"
	"mcpbox/internal/cgroup"
	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/instance"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/track"
	"mcpbox/internal/workspace"
)

// stopGrace is how long a server gets to exit after its stdin closes
// before its sandbox is killed.
const stopGrace = 2 * time.Second

// LocalOptions configure a Local. Only Spec is required.
type LocalOptions struct {
	// Name is the server's name: in its log lines, its sandboxes' records
	// and its workspace dirs.
	Name string
	// Spec is the sandbox of the server, complete but for the secrets of
	// Secrets and the per-scope dirs below (specconv.Server).
	Spec sandbox.Spec
	// Secrets are resolved at each start, with the start's context; nil:
	// only the secrets Spec holds already.
	Secrets []config.Secret
	// Workspaces, if set, is the dir under which each scope gets its own
	// /workspace/output (config `output: {}`).
	Workspaces string
	// Overlays, if set, is the dir under which each scope gets the upper
	// and work dirs of its /workspace/input overlay (input mode overlay).
	Overlays string
	// Template, if set, seeds each new workspace (a dir, an archive or a
	// snapshot).
	Template string
	// Artifacts, if set, are copied out of the output when a sandbox ends,
	// to ArtifactsDir/AGENT/SERVER/SANDBOX-ID.
	Artifacts    *workspace.ArtifactRules
	ArtifactsDir string
	// Log is the gateway's log; nil: nothing is logged.
	Log *slog.Logger
	// Stderr is where the server's stderr goes, line-prefixed with its
	// name; nil: it is dropped.
	Stderr io.Writer
	// Book learns every secret value resolved, before the server starts,
	// so that nothing the server writes can carry it out; the gateway's
	// filter and log redact with it. Nil: a book of the launcher's own.
	Book *redact.Book
	// Observer, if set, is told of each sandbox's life: the guard tracks
	// it for the audit (serve); allowed egress is then logged at debug
	// level only. Nil for exec and run.
	Observer Observer
	// CA is the gateway's proxy CA for the Secrets with inject (see
	// ApplyProxySecrets); nil: each sandbox makes its own.
	CA *egress.CA
	// WarmPool, if positive, is how many sandboxes of Spec are kept
	// prepared (sandbox.Pool); a start whose sandbox is Spec's but for the
	// command and environment takes one. Close the Local to end them.
	WarmPool int
}

// Local starts its Spec (with the secrets and per-scope dirs added) for
// each scope: the backend of a server that runs in a sandbox on this
// host.
type Local struct {
	name         string
	base         sandbox.Spec
	secrets      []config.Secret
	workspaces   string
	overlays     string
	log          *slog.Logger
	stderr       io.Writer
	book         *redact.Book
	observer     Observer
	template     string
	artifacts    *workspace.ArtifactRules
	artifactsDir string
	ca           *egress.CA
	pool         *sandbox.Pool // nil without a warm pool

	live liveSet // the sandboxes started and not yet ended
}

// NewLocal returns the backend of one server run in a sandbox on this
// host.
func NewLocal(opts LocalOptions) *Local {
	l := &Local{
		name: opts.Name, base: opts.Spec, secrets: opts.Secrets,
		workspaces: opts.Workspaces, overlays: opts.Overlays, template: opts.Template,
		artifacts: opts.Artifacts, artifactsDir: opts.ArtifactsDir,
		log: opts.Log, stderr: opts.Stderr, book: opts.Book, observer: opts.Observer, ca: opts.CA,
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.stderr == nil {
		l.stderr = io.Discard
	}
	if l.book == nil {
		l.book = &redact.Book{}
	}
	if opts.WarmPool > 0 {
		l.pool = sandbox.NewPool(l.base, opts.WarmPool)
	}
	return l
}

// Close ends the sandboxes of the warm pool, if any; started ones are
// the gateway's to stop.
func (l *Local) Close() {
	if l.pool != nil {
		l.pool.Close()
	}
}

// Observer is told of a sandbox's life. *guard.Guard implements it: it
// audits each event and tracks running sandboxes for call joins. Its
// methods are called from the sandboxes' goroutines and the egress proxy.
type Observer interface {
	// SandboxStarted registers a started sandbox; the returned func
	// unregisters it once it has ended.
	SandboxStarted(launcher string, scope gateway.Scope, t *track.Sandbox) (untrack func())
	// SandboxEnded reports its end; expected is false for a crash.
	SandboxEnded(launcher string, scope gateway.Scope, t *track.Sandbox, status string, expected bool)
	// SandboxEvent reports a pause or resume (audit.EventSandbox*).
	SandboxEvent(event, launcher string, scope gateway.Scope, t *track.Sandbox, status string)
	// EgressEvent reports one egress connection once it has ended.
	EgressEvent(launcher string, scope gateway.Scope, t *track.Sandbox, ev egress.Event)
}

// noObserver is the observer of a launcher without one.
type noObserver struct{}

func (noObserver) SandboxStarted(string, gateway.Scope, *track.Sandbox) func()        { return func() {} }
func (noObserver) SandboxEnded(string, gateway.Scope, *track.Sandbox, string, bool)   {}
func (noObserver) SandboxEvent(string, string, gateway.Scope, *track.Sandbox, string) {}
func (noObserver) EgressEvent(string, gateway.Scope, *track.Sandbox, egress.Event)    {}

func (l *Local) obs() Observer {
	if l.observer == nil {
		return noObserver{}
	}
	return l.observer
}

// sandboxInstance is one sandbox of a launcher, for one scope, from its
// start to its end; the gateway's Process funcs are its methods.
type sandboxInstance struct {
	l     *Local
	scope gateway.Scope
	spec  sandbox.Spec
	rec   *track.Sandbox // what the audit and `mcpbox ps` know of it
	sb    *sandbox.Sandbox
	// stdin and stdout are the gateway's ends of the server's stdio.
	stdin  io.WriteCloser
	stdout io.ReadCloser
	// lines and redactor carry the server's stderr to the log; redactor
	// is nil when there is no secret to redact.
	lines    *lineWriter
	redactor *redact.QuietWriter
	// endLife ends the context the sandbox lives under.
	endLife context.CancelFunc
	// unlockOverlay releases the input overlay's lock once the sandbox
	// (its mount with it) has ended; nil without an overlay.
	unlockOverlay func()

	// killed: stop had to kill the sandbox (it did not exit when its stdin
	// closed), so its end is a stop, not a crash, whatever its status.
	killed atomic.Bool
	// waited is closed when the sandbox has ended and its end is
	// accounted for.
	waited chan struct{}
	status string // how it ended; written before waited closes
	clean  bool   // it exited with status 0; written before waited closes
}

// start runs the steps of a start in order (secrets, stderr, egress,
// workspace, overlay, sandbox); a step that holds something registers its
// undo before the next, and a failed start runs them, newest first. The
// sandbox lives until stop, not until ctx ends; ctx only aborts the start
// (and a slow cmd: secret).
func (l *Local) start(ctx context.Context, scope gateway.Scope) (_ *sandboxInstance, err error) {
	in := &sandboxInstance{l: l, scope: scope, spec: l.base, waited: make(chan struct{}),
		rec: track.NewSandbox()}
	in.spec.Env = append([]string(nil), l.base.Env...)
	in.spec.Secrets = append([]sandbox.Secret(nil), l.base.Secrets...)
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	proxied, err := in.resolveSecrets(ctx)
	if err != nil {
		return nil, err
	}
	if err := in.setupProxySecrets(proxied); err != nil {
		return nil, err
	}
	in.setupStderr()
	in.setupEgress()
	if err := in.setupWorkspace(); err != nil {
		return nil, err
	}
	if err := in.setupOverlay(); err != nil {
		return nil, err
	}
	if in.unlockOverlay != nil {
		undo = append(undo, in.unlockOverlay)
	}
	in.trackWritable()
	// One id everywhere: ps, the audit, the sandbox's cgroup and the
	// cleanup log that names a leftover one. The sandbox takes the
	// record's, unless a prepared sandbox of the warm pool may serve: the
	// record takes that one's id (or a cold start's) below. A sandbox with
	// a network, whose events name the record from its start, is never
	// prepared.
	if l.pool == nil || in.spec.Network.Enabled() {
		in.spec.ID = in.rec.ID
	}
	began := time.Now()
	if err := in.startSandbox(ctx); err != nil {
		return nil, err
	}
	if in.rec.ID != in.sb.ID {
		// Only where the pool may serve, so never with a network: no
		// egress event reads the record yet.
		in.rec.ID = in.sb.ID
	}
	in.rec.Prepared = in.sb.Prepared
	if l.pool != nil {
		// Whether the warm pool served, and what it saved, is otherwise
		// visible nowhere.
		l.log.Info("server sandbox started", "server", l.name, "from", map[bool]string{true: "warm pool", false: "cold"}[in.sb.Prepared],
			"start", time.Since(began).Round(time.Microsecond))
	}
	for _, layer := range in.sb.Degraded {
		l.log.Warn("sandbox runs without an isolation layer (accepted by sandbox.require or --allow-degraded)", "server", l.name, "layer", layer)
	}
	in.rec.Stats, in.rec.NetTries = in.sb.Stats, in.sb.NetTries
	untrack := l.obs().SandboxStarted(l.name, scope, in.rec)
	l.live.add(in)
	go in.wait(untrack)
	return in, nil
}

// Start starts a sandbox for scope (Local.start).
func (l *Local) Start(ctx context.Context, scope gateway.Scope) (Instance, error) {
	in, err := l.start(ctx, scope)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return in, nil
}

// List returns the sandboxes running.
func (l *Local) List() []Instance { return l.live.list() }

// resolveSecrets resolves the server's secrets with ctx and teaches the
// book every value, before anything of the server runs.
// Those added at the proxy (inject) are returned, their values learnt.
func (in *sandboxInstance) resolveSecrets(ctx context.Context) ([]ProxySecret, error) {
	plain, proxied, err := ResolveAll(ctx, in.l.secrets)
	if err != nil {
		return nil, err
	}
	in.spec.Secrets = append(in.spec.Secrets, plain...)
	for _, sec := range in.spec.Secrets {
		if isPlaceholder(in.spec, sec) {
			continue // run --policy: the value is at the proxy only
		}
		if err := in.l.book.Add(sec.Name, sec.Value); err != nil {
			return nil, fmt.Errorf("secret %s: %w", sec.Name, err)
		}
	}
	for _, p := range proxied {
		if err := p.Learn(in.l.book); err != nil {
			return nil, err
		}
	}
	return proxied, nil
}

// setupStderr prefixes the server's stderr lines with its name. The stream
// redactor catches a value even when the server writes it in pieces; it is
// made after the secrets are known.
func (in *sandboxInstance) setupStderr() {
	in.lines = &lineWriter{w: in.l.stderr, prefix: "mcpbox: server " + in.l.name + ": "}
	if r := in.l.book.Redactor(); r != nil {
		in.redactor = r.QuietWriter(in.lines, stderrQuiet)
	}
}

// lastLineRecent is how recent a server's last stderr line must be to
// be quoted in how it ended.
const lastLineRecent = 5 * time.Second

// stderrQuiet is how long a server's stderr must be quiet before the
// redactor writes what it holds back (the start of what could be a
// secret's form): the last line before a server hangs shows then.
const stderrQuiet = time.Second

func (in *sandboxInstance) stderrWriter() io.Writer {
	if in.redactor != nil {
		return in.redactor
	}
	return in.lines
}

// setupEgress logs the proxy's decisions and tracks the connections for
// the audit's joins.
func (in *sandboxInstance) setupEgress() {
	if !in.spec.Network.Enabled() {
		return
	}
	l, rec := in.l, in.rec
	// With an audit (serve) an allowed connection is recorded there; the
	// log keeps the refusals unless --log-level debug.
	allowLevel := slog.LevelInfo
	if l.observer != nil {
		allowLevel = slog.LevelDebug
	}
	logEv := egressLogger(l.log, l.name, allowLevel)
	obs := l.obs()
	in.spec.Network.Log = func(ev egress.Event) {
		ev = redactEvent(l.book, ev)
		logEv(ev)
		rec.Closed(ev)
		obs.EgressEvent(l.name, in.scope, rec, ev)
	}
	in.spec.Network.Opened = func(ev egress.Event) { rec.Opened(redactEvent(l.book, ev)) }
}

// setupWorkspace makes the scope's output dir, seeded from the template
// when it is new.
func (in *sandboxInstance) setupWorkspace() error {
	l := in.l
	if l.workspaces == "" {
		return nil
	}
	base := workspace.Base(l.workspaces, in.wsScope())
	_, statErr := os.Stat(base)
	dir, err := workspace.MakeOutput(l.workspaces, in.wsScope())
	if err != nil {
		return err
	}
	if os.IsNotExist(statErr) && l.template != "" {
		if err := workspace.SeedPart(l.template, "output", dir); err != nil {
			workspace.Remove(base)
			return l.seedFailed(err)
		}
	}
	in.spec.Output = dir
	if rel, err := filepath.Rel(l.workspaces, filepath.Dir(dir)); err == nil {
		in.rec.Workspace = filepath.ToSlash(rel)
	}
	return nil
}

// setupOverlay makes the scope's input overlay dirs and takes their lock
// (in.unlockOverlay), held until the sandbox has ended.
func (in *sandboxInstance) setupOverlay() error {
	l, rec := in.l, in.rec
	if l.overlays == "" {
		return nil
	}
	base := workspace.Base(l.overlays, in.wsScope())
	_, statErr := os.Stat(filepath.Join(base, "overlay"))
	upper, work, err := workspace.MakeOverlay(l.overlays, in.wsScope())
	if err != nil {
		return err
	}
	ov := &sandbox.Overlay{Upper: upper, Work: work}
	unlock, err := instance.LockOverlay(base)
	if err != nil {
		return err
	}
	if os.IsNotExist(statErr) && workspace.IsSnapshot(l.template) {
		if err := workspace.SeedPart(l.template, "overlay", ov.Upper); err != nil {
			workspace.Remove(base)
			unlock()
			return l.seedFailed(err)
		}
	}
	in.unlockOverlay = unlock
	in.spec.InputOverlay = ov
	rec.Lower, rec.Upper = in.spec.Input, ov.Upper
	if rec.Workspace == "" {
		if rel, err := filepath.Rel(l.overlays, filepath.Dir(filepath.Dir(ov.Upper))); err == nil {
			rec.Workspace = filepath.ToSlash(rel)
		}
	}
	rec.AddWritable(ov.Upper, "/workspace/input")
	return nil
}

// trackWritable lists the host dirs the sandbox may write, for the files
// a call changed.
func (in *sandboxInstance) trackWritable() {
	if in.spec.Output != "" {
		in.rec.AddWritable(in.spec.Output, "/workspace/output")
	}
	for _, m := range in.spec.Mounts {
		if m.Writable {
			in.rec.AddWritable(m.Source, m.Target)
		}
	}
}

// startSandbox starts the sandbox with pipes for its stdio; on failure
// everything it made is gone again.
func (in *sandboxInstance) startSandbox(ctx context.Context) error {
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	life, endLife := context.WithCancel(context.Background())
	abort := context.AfterFunc(ctx, endLife)
	start := sandbox.Start
	if in.l.pool != nil {
		start = in.l.pool.Start // prepared if one matches, else cold
	}
	sb, err := start(life, in.spec, sandbox.Stdio{Stdin: inR, Stdout: outW, Stderr: in.stderrWriter()})
	inR.Close()
	outW.Close()
	if !abort() && err == nil {
		err = context.Cause(ctx)
		sb.Kill()
		sb.Wait()
	}
	if err != nil {
		endLife()
		inW.Close()
		outR.Close()
		return err
	}
	in.sb, in.stdin, in.stdout, in.endLife = sb, inW, outR, endLife
	return nil
}

// wait accounts for the sandbox's end: its status, its artifacts, the
// audit's stop or crash; then it closes waited.
func (in *sandboxInstance) wait(untrack func()) {
	defer untrack()
	l, rec := in.l, in.rec
	res, err := in.sb.Wait()
	if in.unlockOverlay != nil {
		in.unlockOverlay()
	}
	in.status, in.clean = exitStatus(res, err)
	code := -1
	if res != nil {
		code = res.ExitCode
	}
	rec.SetExit(stoppedStatus(in.status, code, rec.State() == track.StateStopping, in.killed.Load()))
	if se := sizeExceeded(res); err == nil && se != nil && se.AtStart {
		// The client hears of /workspace/output; the operator needs
		// the host dir to clean up.
		l.log.Error("the server's workspace dir was over its size limit when its sandbox started, which was stopped: remove files from it, or raise "+sizeKey(se),
			"server", l.name, "dir", se.Host, "holds", config.Size(se.Used).String(), "limit", config.Size(se.Limit).String())
	}
	if l.artifacts != nil && in.spec.Output != "" {
		rec.Artifacts = l.exportArtifacts(in.spec.Output, in.scope, rec.ID)
	}
	// A server ends by exiting 0 when its stdin closes; anything else (a
	// crash, a failure status, the OOM killer) is a failure, also when the
	// gateway noticed it first and called stop.
	expected := in.clean || in.killed.Load()
	if expected {
		rec.SetState(gateway.StateStopped)
	} else {
		rec.SetState(gateway.StateFailed)
	}
	l.obs().SandboxEnded(l.name, in.scope, rec, in.status, expected)
	l.live.remove(in)
	close(in.waited)
}

// exitStatus says how a sandbox ended, and whether cleanly (status 0).
func exitStatus(res *sandbox.Result, err error) (string, bool) {
	switch {
	case err != nil:
		return err.Error(), false
	case res.SizeExceeded != nil && res.SizeExceeded.Stopped:
		return "killed: " + SizeReport(res.SizeExceeded), false
	case res.SizeExceeded != nil:
		// Not clean: the server broke its limit before it exited.
		return fmt.Sprintf("exited with status %d and %s", res.ExitCode, SizeReport(res.SizeExceeded)), false
	case res.OOMKilled:
		return "killed: out of memory", false
	case res.PidsExhausted:
		return fmt.Sprintf("exited with status %d after hitting its process limit", res.ExitCode), false
	}
	return fmt.Sprintf("exited with status %d", res.ExitCode), res.ExitCode == 0
}

// stoppedStatus is how ps shows the end of a sandbox: status, or, when
// mcpbox stopped it (stop, idle timeout, the session's end, shutdown),
// that first, since its server's "exited with status 0" then only means
// it obeyed. A death by a signal (code 128+N) that mcpbox did not send is
// no stop of mcpbox's, even when the gateway, seeing the server gone,
// asked for one: a stop only closes the server's input, and the kill
// after the grace sets killed.
func stoppedStatus(status string, code int, stopping, killed bool) string {
	switch {
	case !stopping, !killed && code > 128:
		return status
	case killed:
		return fmt.Sprintf("%s (killed: it did not exit within %s)", track.StoppedByMcpbox, stopGrace)
	}
	return track.StoppedByMcpbox + " (" + status + ")"
}

// SizeReport says why a sandbox was stopped for a workspace dir's size.
func SizeReport(se *sandbox.SizeError) string {
	if se.Err != nil {
		return fmt.Sprintf("%s could not be measured against its size limit of %s: %v", se.Dir, config.Size(se.Limit), se.Err)
	}
	if se.AtStart {
		return fmt.Sprintf("%s held %d bytes when the sandbox started, over its size limit of %s (kept from an earlier sandbox): "+
			"every start is stopped until files are removed from it (serve's log names the host dir) or %s is raised",
			se.Dir, se.Used, config.Size(se.Limit), sizeKey(se))
	}
	return fmt.Sprintf("%s holds %d bytes, over its size limit of %s (what was written stays on the host)",
		se.Dir, se.Used, config.Size(se.Limit))
}

// sizeExceeded is res's SizeExceeded; nil without a result (Wait failed).
func sizeExceeded(res *sandbox.Result) *sandbox.SizeError {
	if res == nil {
		return nil
	}
	return res.SizeExceeded
}

// sizeKey is the config key of the limit se broke.
func sizeKey(se *sandbox.SizeError) string {
	if se.Dir == sandbox.InputDir {
		return "filesystem.input.size"
	}
	return "filesystem.output.size"
}

// process is what the gateway holds of the instance.
func (in *sandboxInstance) Process() *gateway.Process {
	return &gateway.Process{
		Stdin: in.stdin, Stdout: in.stdout,
		Roots:    roots(&in.spec),
		Stop:     in.Stop,
		Gone:     in.gone,
		Clean:    func() bool { return in.endedWithin(stopGrace) && in.clean },
		Pause:    in.Pause,
		Resume:   in.Resume,
		Describe: in.describe,
	}
}

// endedWithin waits up to d for the end the caller has seen coming.
func (in *sandboxInstance) endedWithin(d time.Duration) bool {
	select {
	case <-in.waited:
		return true
	case <-time.After(d):
		return false
	}
}

// Scope is the scope the instance serves.
func (in *sandboxInstance) Scope() gateway.Scope { return in.scope }

// Stop closes the server's stdin, gives it stopGrace to exit, kills the
// sandbox if it does not, and frees the rest once it has ended. A paused
// sandbox is thawed first: frozen, its server could not read the end of
// its input, and every stop of it took the whole grace and a kill.
func (in *sandboxInstance) Stop() {
	in.rec.MarkStopping()
	in.end()
}

// gone is Stop for a server that ended its output unasked: its end is
// its own (a crash, an exit), not a stop, for ps.
func (in *sandboxInstance) gone() { in.end() }

func (in *sandboxInstance) end() {
	_ = in.sb.ResumeToStop() // a failure leaves it to the kill
	in.stdin.Close()
	if !in.endedWithin(stopGrace) {
		in.killed.Store(true)
		in.sb.Kill()
		<-in.waited
	}
	in.endLife()
	in.stdout.Close()
	if in.redactor != nil {
		in.redactor.Close()
	}
	in.lines.Close()
}

// Pause freezes the sandbox (Server.Idle's IdlePause). A sandbox without
// a freezer is an error wrapping cgroup.ErrUnsupported that names it as
// `mcpbox ps` does and says what to do instead.
func (in *sandboxInstance) Pause() error {
	if err := in.sb.Pause(); errors.Is(err, cgroup.ErrUnsupported) {
		return fmt.Errorf("sandbox %s cannot be paused: it has no cgroup freezer (%w; mcpbox doctor says what this host lacks); mcpbox stop %[1]s ends it instead, and its next call starts a new one",
			in.rec.ID, cgroup.ErrUnsupported)
	} else if err != nil {
		return err
	}
	in.rec.SetState(gateway.StatePaused)
	in.l.obs().SandboxEvent(audit.EventSandboxPause, in.l.name, in.scope, in.rec, "")
	return nil
}

// Resume thaws a paused sandbox.
func (in *sandboxInstance) Resume() error {
	if err := in.sb.Resume(); err != nil {
		return err
	}
	in.rec.SetState(gateway.StateRunning)
	in.l.obs().SandboxEvent(audit.EventSandboxResume, in.l.name, in.scope, in.rec, "")
	return nil
}

// Stats reads the sandbox's resource use.
func (in *sandboxInstance) Stats() (cgroup.Stats, error) { return in.sb.Stats() }

// describe says how the sandbox ended, once it has ("" before).
func (in *sandboxInstance) describe() string {
	if !in.endedWithin(stopGrace) {
		return ""
	}
	// The sandbox has ended and Wait has copied all of its stderr: what
	// the redactor holds and a last line without a newline can go out,
	// and the last line says why a server failed at start.
	if in.redactor != nil {
		_ = in.redactor.Flush()
	}
	in.lines.Close()
	switch last, errLine := in.lines.Last(lastLineRecent); {
	case errLine != "":
		return in.status + " (its stderr's last error: '" + errLine + "'; last line: '" + last + "')"
	case last != "":
		return in.status + " (its stderr's last line: '" + last + "')"
	}
	return in.status
}

// Release removes a session's workspace when the session is over, but
// for an input overlay it changed (workspace.ReleaseSession): agent and
// shared workspaces stay (they are the agent's files), and so do a
// session's edits to its input.
func (l *Local) Release(scope gateway.Scope) {
	if scope.Session == "" {
		return
	}
	ws := wsScope(scope, l.name)
	if l.overlays != "" {
		kept, pruned := workspace.ReleaseSession(workspace.Base(l.overlays, ws))
		if kept {
			l.log.Info("the session's changes to its input overlay are kept (mcpbox diff --server "+l.name+" --session "+scope.Session+" prints them)",
				"server", l.name, "session", scope.Session, "removed_oldest", pruned)
		}
	}
	if l.workspaces != "" && l.workspaces != l.overlays {
		workspace.Remove(workspace.Base(l.workspaces, ws))
	}
}

// roots are the sandbox paths a server may work in, for roots/list.
func roots(spec *sandbox.Spec) []gateway.Root {
	var rs []gateway.Root
	if spec.Input != "" {
		rs = append(rs, gateway.Root{URI: "file:///workspace/input", Name: "input"})
	}
	if spec.Output != "" {
		rs = append(rs, gateway.Root{URI: "file:///workspace/output", Name: "output"})
	}
	for _, m := range spec.Mounts {
		if m.Internal {
			// The package store or mcpbox's binary: offered as a root, it
			// led a filesystem server to list and serve its own code.
			continue
		}
		if fi, err := os.Stat(m.Source); err != nil || !fi.IsDir() {
			// A file mount (a config file, a CA bundle) is something the
			// server reads, not a directory to work in.
			continue
		}
		rs = append(rs, gateway.Root{URI: "file://" + m.Target, Name: filepath.Base(m.Target)})
	}
	return rs
}
