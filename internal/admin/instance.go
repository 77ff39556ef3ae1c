package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/instance"
)

// Instance is this serve among the instances of its state dir: its admin
// server and its record.
type Instance struct {
	srv     *Server
	log     *slog.Logger
	shared  bool
	crashed []int // pids of instances that ended without stopping

	mu  sync.Mutex
	rec instance.Record // guarded by mu
}

// InstanceOptions configure Start.
type InstanceOptions struct {
	// Config is the served config (Options.Config of the admin server).
	Config *config.Config
	// Logger logs what the start removed and failed to. Nil: discarded.
	Logger *slog.Logger
	// Leftovers, if non-nil, removes what crashed gateways left in the
	// state dir; shared says other instances are live (their session
	// workspaces must stay). It runs under the start lock, before the
	// record is written.
	Leftovers func(shared bool)
}

// NewRecord describes this serve (the config at configPath, "" for the
// embedded default, served for the directory base) for its record.
func NewRecord(dir, configPath, base string, stdio bool, httpAddr string) instance.Record {
	rec := instance.Record{PID: os.Getpid(), Started: time.Now().UTC(), StateDir: dir}
	rec.Project, _ = filepath.Abs(base)
	if configPath != "" {
		rec.Config, _ = filepath.Abs(configPath)
	}
	switch {
	case stdio && httpAddr != "":
		rec.Transport = "stdio+http"
	case stdio:
		rec.Transport = "stdio"
	default:
		rec.Transport = "http"
	}
	return rec
}

// Start opens this serve's admin socket on the record's state dir (its
// own: instances/PID.sock), removes what dead instances of the dir left,
// and writes its record. Only when no other instance of dir is live may
// Leftovers remove a crashed gateway's session workspaces: another live
// instance may be using them. The start lock makes "alone" hold until the
// record is written: an instance that starts later sees this one.
func Start(ctx context.Context, rec instance.Record, opts InstanceOptions) (*Instance, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := rec.StateDir
	if err := instance.MakeDir(dir); err != nil {
		return nil, err
	}
	// Not ctx: the socket answers until Close removes the record, so that
	// an instance starting while this one stops sees it live (shared),
	// neither a crashed one nor gone: it would take its record for a
	// crash's and remove the session workspaces still in use.
	srv, err := Serve(context.WithoutCancel(ctx), rec.Socket(), Options{Config: opts.Config, Logger: log})
	if err != nil {
		return nil, err
	}
	unlock, err := instance.Lock(dir)
	if err != nil {
		srv.Close()
		return nil, err
	}
	defer unlock()
	shared, crashed := removeDead(dir, log)
	if opts.Leftovers != nil {
		opts.Leftovers(shared)
	}
	if err := instance.Write(rec); err != nil {
		srv.Close()
		return nil, err
	}
	// Only --all needs the registry: a home without one (a service user)
	// is no reason to warn.
	if root, err := instance.Root(); err == nil {
		if err := instance.Register(root, dir); err != nil {
			log.Debug("registering the state dir for mcpbox ps --all", "err", err)
		}
	}
	return &Instance{srv: srv, log: log, shared: shared, crashed: crashed, rec: rec}, nil
}

// removeDead removes the records and sockets of dead instances of dir,
// and reports whether others are live (or it could not tell) and the
// pids of the dead: an instance that stops removes its own, so these
// ended without stopping (killed, crashed).
func removeDead(dir string, log *slog.Logger) (shared bool, gone []int) {
	gone, err := instance.RemoveStale(dir)
	for _, pid := range gone {
		log.Info("removed a dead instance's record and socket", "pid", pid)
	}
	if err != nil {
		log.Warn("removing dead instances' records", "err", err)
	}
	others, err := instance.List(dir)
	if err != nil {
		log.Warn("listing the other instances", "err", err)
	}
	return len(others) > 0 || err != nil, gone
}

// Crashed lists the pids of the instances of the state dir that had
// ended without stopping when this one started (their records were
// left): the audit says so, since the calls they had in flight have no
// record.
func (i *Instance) Crashed() []int { return i.crashed }

// Shared reports whether other instances of the state dir were live when
// this one started.
func (i *Instance) Shared() bool { return i.shared }

// Attach gives the admin server its back-end once the gateway runs.
func (i *Instance) Attach(b Backend) { i.srv.Attach(b) }

// Detach stops handing admin requests to the back-end and waits for the
// ones in flight (Server.Detach): call it before the back-end closes.
func (i *Instance) Detach() { i.srv.Detach() }

// Update changes this instance's record (the URL once HTTP listens).
func (i *Instance) Update(f func(*instance.Record)) {
	i.mu.Lock()
	defer i.mu.Unlock()
	f(&i.rec)
	if err := instance.Write(i.rec); err != nil {
		i.log.Warn("updating the instance record", "err", err)
	}
}

// Close removes the record, then the socket, and waits for the admin
// handlers.
func (i *Instance) Close() {
	i.mu.Lock()
	rec := i.rec
	i.mu.Unlock()
	instance.Remove(rec.StateDir, rec.PID)
	i.srv.Close()
}

// webSocket serves the approval broker's JSON endpoint (for a dashboard)
// in the state dir. It is a unix socket with the admin socket's checks, not
// a route of the MCP endpoint: an agent holding a client token must not be
// able to approve its own calls.
const webSocket = "approvals.sock"

// webSocketPath is where this instance serves its approvals endpoint:
// the state dir's approvals.sock if no live instance holds it, else one
// of its own beside its admin socket.
func webSocketPath(dir string, pid int) string {
	shared := filepath.Join(dir, webSocket)
	if !instance.Alive(shared) {
		return shared
	}
	return filepath.Join(instance.Dir(dir), fmt.Sprintf("%d.approvals.sock", pid))
}

// ServeWeb serves the approvals endpoint h of the instance of dir until
// ctx ends or stop, choosing its socket (webSocketPath) under the start
// lock so that two instances starting together do not both take the
// shared one; it returns the path. Only peers the admin socket admits
// are served.
func ServeWeb(ctx context.Context, dir string, h http.Handler) (path string, stop func(), err error) {
	unlock, err := instance.Lock(dir)
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	path = webSocketPath(dir, os.Getpid())
	stop, err = serveWeb(ctx, path, h)
	return path, stop, err
}

// webShutdownWait bounds how long stopping the approvals endpoint waits
// for its requests in flight.
const webShutdownWait = 5 * time.Second

// serveWeb serves h on the unix socket path until ctx ends. The stop
// function waits for the requests in flight (a decision writes to the
// broker's store, which closes after it), webShutdownWait at most.
func serveWeb(ctx context.Context, path string, h http.Handler) (func(), error) {
	ln, err := listenPrivate(path, "approvals")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(peerListener{ln})
	// The end of ctx stops accepting; requests in flight end in stop.
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	return func() {
		stop()
		sctx, cancel := context.WithTimeout(context.Background(), webShutdownWait)
		defer cancel()
		srv.Shutdown(sctx)
		srv.Close()
		os.Remove(path)
	}, nil
}

// ExplainAddrInUse adds to a failed listen on addr, if the port is taken,
// who holds it (an mcpbox instance: its project, from the records) and
// how to pick a free one. Other errors come back unchanged.
func ExplainAddrInUse(addr string, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	who := "a process this user cannot inspect"
	if pid, comm, ok := instance.PortHolder(port); ok {
		who = fmt.Sprintf("pid %d (%s)", pid, comm)
		if root, rerr := instance.Root(); rerr == nil {
			recs, _ := instance.All(root)
			for _, r := range recs {
				if r.PID == pid {
					who = fmt.Sprintf("mcpbox serve pid %d of project %s (%s)", pid, r.Project, cmp.Or(r.URL, r.Transport))
				}
			}
		}
	}
	return fmt.Errorf("%w: port %d is held by %s; serve on a free port with --http 127.0.0.1:0 (the URL is printed, and listed by mcpbox ps)", err, port, who)
}
