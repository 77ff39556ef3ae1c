package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/instance"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/track"
	"mcpbox/internal/workspace"
)

// stopGrace is how long a server gets to exit after its stdin closes
// before its sandbox is killed.
const stopGrace = 2 * time.Second

// sandboxLauncher starts base (a complete Spec but for Args' server
// command, secrets and a per-agent output) for each scope.
type sandboxLauncher struct {
	name    string
	base    sandbox.Spec
	secrets []config.Secret
	// workspaces, if set, is the dir under which each scope gets its own
	// /workspace/output (config `output: {}`).
	workspaces string
	// overlays, if set, is the dir under which each scope gets the upper
	// and work dirs of its /workspace/input overlay (input mode overlay).
	overlays string
	stateDir string // for groups: checked against their mounts
	log      *slog.Logger
	stderr   io.Writer // where the server's stderr goes, line-prefixed with its name
	// book learns every secret value resolved, before the server starts,
	// so that nothing the server writes can carry it out.
	book *redact.Book
	// guard, if set, tracks each sandbox for the audit (serve).
	guard *guard.Guard
	// template, if set, seeds each new workspace (a dir, an archive or a
	// snapshot).
	template string
	// artifacts, if set, are copied out of the output when a sandbox ends,
	// to artifactsDir/AGENT/SERVER/SANDBOX-ID.
	artifacts    *workspace.ArtifactRules
	artifactsDir string
}

func (l *sandboxLauncher) launch(ctx context.Context, scope gateway.Scope) (*gateway.Process, error) {
	spec := l.base
	spec.Env = append([]string(nil), l.base.Env...)
	spec.Secrets = append([]sandbox.Secret(nil), l.base.Secrets...)
	for _, sec := range l.secrets {
		v, err := resolveSecret(sec.Name, sec.From, sec.As == config.SecretAsFile)
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", sec.Name, err)
		}
		spec.Secrets = append(spec.Secrets, v)
	}
	for _, sec := range spec.Secrets {
		if err := l.book.Add(sec.Name, sec.Value); err != nil {
			return nil, fmt.Errorf("secret %s: %w", sec.Name, err)
		}
	}
	// The stream redactor catches a value even when the server writes it
	// in pieces; it is made after the values above are known.
	lines := &lineWriter{w: l.stderr, prefix: "mcpbox: server " + l.name + ": "}
	var stderr io.Writer = lines
	var stderrRedactor *redact.Writer
	if r := l.book.Redactor(); r != nil {
		stderrRedactor = r.Writer(lines)
		stderr = stderrRedactor
	}
	track := track.NewSandbox()
	// The input overlay's lock, held until the sandbox has ended (its
	// mount with it); released here if the launch fails.
	var unlockOverlay func()
	defer func() {
		if unlockOverlay != nil {
			unlockOverlay()
		}
	}()
	if spec.Network.Enabled() {
		// With an audit (serve) an allowed connection is recorded there;
		// the log keeps the refusals unless --log-level debug.
		allowLevel := slog.LevelInfo
		if l.guard != nil {
			allowLevel = slog.LevelDebug
		}
		logEv := egressLogger(l.log, l.name, l.book, allowLevel)
		spec.Network.Log = func(ev egress.Event) {
			logEv(ev)
			track.Closed(ev)
			l.guard.EgressEvent(l.name, scope, track, ev)
		}
		spec.Network.Opened = track.Opened
	}
	if l.workspaces != "" {
		_, statErr := os.Stat(workspaceBase(l.workspaces, scope, l.name))
		dir, err := workspaceDir(l.workspaces, scope, l.name)
		if err != nil {
			return nil, err
		}
		if os.IsNotExist(statErr) && l.template != "" {
			if err := seedWorkspace(l.template, "output", dir); err != nil {
				removeWorkspace(workspaceBase(l.workspaces, scope, l.name))
				return nil, l.seedFailed(err)
			}
		}
		spec.Output = dir
		if rel, err := filepath.Rel(l.workspaces, filepath.Dir(dir)); err == nil {
			track.Workspace = filepath.ToSlash(rel)
		}
	}
	if l.overlays != "" {
		_, statErr := os.Stat(filepath.Join(workspaceBase(l.overlays, scope, l.name), "overlay"))
		ov, err := overlayDirs(l.overlays, scope, l.name)
		if err != nil {
			return nil, err
		}
		if unlockOverlay, err = instance.LockOverlay(workspaceBase(l.overlays, scope, l.name)); err != nil {
			return nil, err
		}
		if os.IsNotExist(statErr) && isSnapshot(l.template) {
			if err := seedWorkspace(l.template, "overlay", ov.Upper); err != nil {
				removeWorkspace(workspaceBase(l.overlays, scope, l.name))
				return nil, l.seedFailed(err)
			}
		}
		spec.InputOverlay = ov
		track.Lower, track.Upper = spec.Input, ov.Upper
		if track.Workspace == "" {
			if rel, err := filepath.Rel(l.overlays, filepath.Dir(filepath.Dir(ov.Upper))); err == nil {
				track.Workspace = filepath.ToSlash(rel)
			}
		}
		track.AddWritable(ov.Upper, "/workspace/input")
	}
	if spec.Output != "" {
		track.AddWritable(spec.Output, "/workspace/output")
	}
	for _, m := range spec.Mounts {
		if m.Writable {
			track.AddWritable(m.Source, m.Target)
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	// The sandbox lives until Stop, not until the request that started
	// it ends; ctx only aborts the start itself.
	life, kill := context.WithCancel(context.Background())
	abort := context.AfterFunc(ctx, kill)
	sb, err := sandbox.Start(life, spec, sandbox.Stdio{Stdin: inR, Stdout: outW, Stderr: stderr})
	inR.Close()
	outW.Close()
	if !abort() && err == nil {
		err = context.Cause(ctx)
		sb.Kill()
		sb.Wait()
	}
	if err != nil {
		kill()
		inW.Close()
		outR.Close()
		return nil, err
	}
	for _, layer := range sb.Degraded {
		l.log.Warn("sandbox runs without an isolation layer (accepted by sandbox.require or --allow-degraded)", "server", l.name, "layer", layer)
	}
	// status and clean are written before waited closes, and read after.
	var (
		status string
		clean  bool
	)
	track.Stats = sb.Stats
	untrack := l.guard.SandboxStarted(l.name, scope, track)
	// killed: Stop had to kill the sandbox (it did not exit when its stdin
	// closed), so its end is a stop, not a crash, whatever its status.
	var killed atomic.Bool
	waited := make(chan struct{})
	overlayEnded := unlockOverlay
	unlockOverlay = nil // the sandbox's now
	go func() {
		defer untrack()
		res, err := sb.Wait()
		if overlayEnded != nil {
			overlayEnded()
		}
		switch {
		case err != nil:
			status = err.Error()
		case res.SizeExceeded != nil && res.SizeExceeded.Stopped:
			status = "killed: " + sizeReport(res.SizeExceeded)
		case res.SizeExceeded != nil:
			// Not clean: the server broke its limit before it exited.
			status = fmt.Sprintf("exited with status %d and %s", res.ExitCode, sizeReport(res.SizeExceeded))
		case res.OOMKilled:
			status = "killed: out of memory"
		case res.PidsExhausted:
			status = fmt.Sprintf("exited with status %d after hitting its process limit", res.ExitCode)
		default:
			status = fmt.Sprintf("exited with status %d", res.ExitCode)
			clean = res.ExitCode == 0
		}
		track.SetExit(status)
		if l.artifacts != nil && spec.Output != "" {
			track.Artifacts = l.exportArtifacts(spec.Output, scope, track.ID)
		}
		// A server ends by exiting 0 when its stdin closes; anything else
		// (a crash, a failure status, the OOM killer) is a failure, also
		// when the gateway noticed it first and called Stop.
		expected := clean || killed.Load()
		if expected {
			track.SetState(gateway.StateStopped)
		} else {
			track.SetState(gateway.StateFailed)
		}
		l.guard.SandboxEnded(l.name, scope, track, status, expected)
		close(waited)
	}()
	// ended waits a little for the exit the caller has seen coming.
	ended := func() bool {
		select {
		case <-waited:
			return true
		case <-time.After(stopGrace):
			return false
		}
	}
	return &gateway.Process{
		Stdin: inW, Stdout: outR,
		Roots: roots(&spec),
		Stop: func() {
			track.MarkStopping()
			inW.Close()
			select {
			case <-waited:
			case <-time.After(stopGrace):
				killed.Store(true)
				sb.Kill()
				<-waited
			}
			kill()
			outR.Close()
			if stderrRedactor != nil {
				stderrRedactor.Close()
			}
			lines.Close()
		},
		Clean: func() bool { return ended() && clean },
		Pause: func() error {
			if err := sb.Pause(); err != nil {
				return err
			}
			track.SetState(gateway.StatePaused)
			l.guard.SandboxEvent(audit.EventSandboxPause, l.name, scope, track, "")
			return nil
		},
		Resume: func() error {
			if err := sb.Resume(); err != nil {
				return err
			}
			track.SetState(gateway.StateRunning)
			l.guard.SandboxEvent(audit.EventSandboxResume, l.name, scope, track, "")
			return nil
		},
		Describe: func() string {
			if !ended() {
				return ""
			}
			return status
		},
	}, nil
}

// egressLogger logs the proxy's decisions, allowed connections at
// allowLevel and the others as warnings; host names are redacted, since a
// server may try to carry a secret out in a DNS name.
func egressLogger(log *slog.Logger, server string, book *redact.Book, allowLevel slog.Level) func(egress.Event) {
	return func(ev egress.Event) {
		level := allowLevel
		if ev.Decision != "allow" {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "egress", "server", server, "decision", ev.Decision,
			"host", book.String(ev.Host), "port", ev.Port, "reason", book.String(ev.Reason))
	}
}

// redactingWriter redacts each write with the book: for the gateway's
// log, whose handler writes one whole record per Write.
type redactingWriter struct {
	w    io.Writer
	book *redact.Book
}

func (rw redactingWriter) Write(p []byte) (int, error) {
	if _, err := rw.w.Write(rw.book.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// release removes a session's workspace when the session is over; agent
// and shared workspaces stay (they are the agent's files).
func (l *sandboxLauncher) release(scope gateway.Scope) {
	if scope.Session == "" {
		return
	}
	for _, root := range []string{l.workspaces, l.overlays} {
		if root != "" {
			removeWorkspace(workspaceBase(root, scope, l.name))
		}
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
		rs = append(rs, gateway.Root{URI: "file://" + m.Target, Name: filepath.Base(m.Target)})
	}
	return rs
}

// remoteLauncher connects to a remote server over Streamable HTTP, with
// headers (e.g. Authorization) whose values come from secret references.
type remoteLauncher struct {
	url     string
	headers map[string]string // header name → secret reference
	book    *redact.Book
}

func (l *remoteLauncher) launch(ctx context.Context, _ gateway.Scope) (*gateway.Process, error) {
	h := http.Header{}
	for name, ref := range l.headers {
		v, err := resolveSecret(name, ref, false)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		if l.book != nil {
			if err := l.book.Add(name, v.Value); err != nil {
				return nil, fmt.Errorf("header %s: %w", name, err)
			}
			// The token of "Bearer TOKEN" may show up alone.
			if scheme, token, ok := strings.Cut(string(v.Value), " "); ok && len(token) >= redact.MinValueLen && !strings.ContainsAny(scheme, "=:") {
				if err := l.book.Add(name, []byte(token)); err != nil {
					return nil, fmt.Errorf("header %s: %w", name, err)
				}
			}
		}
		h.Set(name, string(v.Value))
	}
	client := &http.Client{Transport: headerTransport{h, http.DefaultTransport}}
	t := &mcp.StreamableClientTransport{Endpoint: l.url, HTTPClient: client, MaxRetries: 2}
	c, err := t.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", l.url, err)
	}
	return &gateway.Process{Conn: c}, nil
}

type headerTransport struct {
	h    http.Header
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.next.RoundTrip(r)
}

// lineWriter prefixes every line a server writes to stderr and caps its
// length, so that one server cannot flood or forge the gateway's log.
type lineWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

const maxLogLine = 4096

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLogLine - len(lw.buf)
			lw.buf = append(lw.buf, p[:min(len(p), max(room, 0))]...)
			break
		}
		room := maxLogLine - len(lw.buf)
		lw.buf = append(lw.buf, p[:min(i, max(room, 0))]...)
		lw.flush()
		p = p[i+1:]
	}
	return n, nil
}

// Close writes a last line that had no newline.
func (lw *lineWriter) Close() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if len(lw.buf) > 0 {
		lw.flush()
	}
	return nil
}

func (lw *lineWriter) flush() {
	// C0 and C1 controls and DEL could move the cursor or fake a line of
	// the gateway's own; invalid UTF-8 becomes U+FFFD.
	line := bytes.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, lw.buf)
	fmt.Fprintf(lw.w, "%s%s\n", lw.prefix, line)
	lw.buf = lw.buf[:0]
}
