package cli

import (
	"context"
	"encoding/json"
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
	"text/tabwriter"
	"time"

	"mcpbox/internal/instance"
)

// projectStateDir is the state dir of a project whose config names none:
// see package instance.
func projectStateDir(configPath, base string) (string, error) {
	root, err := instance.Root()
	if err != nil {
		return "", err
	}
	return instance.ProjectStateDir(root, configPath, base)
}

// liveInstance is this serve among the instances of its state dir: its
// admin socket and its record.
type liveInstance struct {
	stopAdmin func()
	log       *slog.Logger
	shared    bool // other instances of the state dir were live at the start

	mu  sync.Mutex
	rec instance.Record // guarded by mu
}

// newRecord describes this serve for its instance record.
func newRecord(dir, configPath, base string, stdio bool, httpAddr string) instance.Record {
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

// startInstance opens this serve's admin socket on dir (its own:
// instances/PID.sock), removes what dead instances of dir left, and
// writes its record. Only when no other instance of dir is live does it
// remove a crashed gateway's session workspaces (cleanLeftovers): another
// live instance may be using them. The start lock makes "alone" hold
// until the record is written: an instance that starts later sees this
// one.
func startInstance(ctx context.Context, a *adminServer, rec instance.Record, log *slog.Logger) (*liveInstance, error) {
	dir := rec.StateDir
	if err := instance.MakeDir(dir); err != nil {
		return nil, err
	}
	stop, err := serveAdmin(ctx, rec.Socket(), a)
	if err != nil {
		return nil, err
	}
	unlock, err := instance.Lock(dir)
	if err != nil {
		stop()
		return nil, err
	}
	defer unlock()
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
	shared := len(others) > 0 || err != nil
	if err := cleanLeftovers(dir, shared, log); err != nil {
		log.Warn("removing crash leftovers", "err", err)
	}
	if err := instance.Write(rec); err != nil {
		stop()
		return nil, err
	}
	// Only --all needs the registry: a home without one (a service user)
	// is no reason to warn.
	if root, err := instance.Root(); err == nil {
		if err := instance.Register(root, dir); err != nil {
			log.Debug("registering the state dir for mcpbox ps --all", "err", err)
		}
	}
	return &liveInstance{stopAdmin: stop, log: log, shared: shared, rec: rec}, nil
}

// update changes this instance's record (the URL once HTTP listens).
func (l *liveInstance) update(f func(*instance.Record)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.rec)
	if err := instance.Write(l.rec); err != nil {
		l.log.Warn("updating the instance record", "err", err)
	}
}

// close removes the record, then the socket.
func (l *liveInstance) close() {
	l.mu.Lock()
	rec := l.rec
	l.mu.Unlock()
	instance.Remove(rec.StateDir, rec.PID)
	l.stopAdmin()
}

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

// serveInstanceWeb serves the approvals endpoint h of this instance on
// webSocketPath, choosing under the start lock so that two instances
// starting together do not both take the shared one; it returns the path.
func serveInstanceWeb(ctx context.Context, dir string, h http.Handler) (string, func(), error) {
	unlock, err := instance.Lock(dir)
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	path := webSocketPath(dir, os.Getpid())
	stop, err := serveWeb(ctx, path, h)
	return path, stop, err
}

// psView is one instance with its sandboxes, as `mcpbox ps` shows it.
type psView struct {
	rec  instance.Record
	rows []sandboxRow
	err  error // the instance did not answer
}

// psViews asks every instance on dir (allStateDirs: every one) for its
// sandboxes.
func psViews(dir string) ([]psView, error) {
	recs, err := instancesFor(dir)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		if dir == allStateDirs {
			return nil, errors.New("no mcpbox serve is running")
		}
		return nil, fmt.Errorf("no mcpbox serve is running on the state dir %s", dir)
	}
	views := make([]psView, 0, len(recs))
	for _, r := range recs {
		v := psView{rec: r}
		rep, err := adminCallSocket(r.StateDir, r.Socket(), adminRequest{Op: "ps"})
		v.err = err
		for _, row := range rep.Sandboxes {
			row.Instance, row.Project = r.PID, r.Project
			v.rows = append(v.rows, row)
		}
		views = append(views, v)
	}
	return views, nil
}

// instanceJSON is an instance as `ps --instances --json` prints it.
type instanceJSON struct {
	ID string `json:"id"`
	instance.Record
	Sandboxes int    `json:"sandboxes"`
	Error     string `json:"error,omitempty"`
}

func (e *env) printInstances(views []psView, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, v := range views {
			j := instanceJSON{ID: strconv.Itoa(v.rec.PID), Record: v.rec, Sandboxes: len(v.rows)}
			if v.err != nil {
				j.Error = v.err.Error()
			}
			_ = enc.Encode(j)
		}
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tPROJECT\tCONFIG\tTRANSPORT\tURL\tSTARTED\tSANDBOXES\tSTATE DIR")
	for _, v := range views {
		r := v.rec
		n := strconv.Itoa(len(v.rows))
		if v.err != nil {
			n = "? (" + oneLine(v.err.Error(), 40) + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.PID, r.Project, cmpOr(r.Config, "(default)"),
			r.Transport, cmpOr(r.URL, "-"), r.Started.Local().Format("15:04:05"), n, r.StateDir)
	}
	tw.Flush()
}

// explainAddrInUse adds to a failed listen on addr, if the port is taken,
// who holds it (an mcpbox instance: its project, from the records) and
// how to pick a free one.
func explainAddrInUse(addr string, err error) error {
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
					who = fmt.Sprintf("mcpbox serve pid %d of project %s (%s)", pid, r.Project, cmpOr(r.URL, r.Transport))
				}
			}
		}
	}
	return fmt.Errorf("%w: port %d is held by %s; serve on a free port with --http 127.0.0.1:0 (the URL is printed, and listed by mcpbox ps)", err, port, who)
}
