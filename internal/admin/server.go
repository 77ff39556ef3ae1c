package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"mcpbox/internal/approval"
	"mcpbox/internal/config"
	"mcpbox/internal/instance"
)

// ErrBusy: another process answers on an instance's admin socket.
var ErrBusy = errors.New("another mcpbox serve answers on this admin socket")

// errStarting is the answer before the gateway is attached.
var errStarting = errors.New("the gateway is still starting; try again")

// errStopping is the answer once the back-end is detached.
var errStopping = errors.New("the gateway is shutting down")

// Backend is what the admin server asks of the running gateway: the call
// pipeline's approvals and pins, its sandboxes, and the gateway's
// renewals. Methods are called from handler goroutines, concurrently.
// by names who asked ("cli:uid=N"), for the audit.
type Backend interface {
	// Approvals lists the pending requests and remembered decisions.
	Approvals() ([]approval.Request, []approval.Remembered)
	// Decide decides the pending request id.
	Decide(id string, d approval.Decision) error
	// Revoke forgets the remembered decision id.
	Revoke(id, by string) error
	// Pins lists the pending definition changes of server ("" for all).
	Pins(server string) ([]PinChange, error)
	// Trust accepts the pending changes of server (key "" for all) whose
	// new hashes are among hashes, and returns them.
	Trust(server, key, by string, hashes []string) ([]PinChange, error)
	// Reload rereads the lock file.
	Reload(by string) error
	// Sandboxes lists the sandboxes.
	Sandboxes() []Sandbox
	// Control pauses, resumes or stops (op "pause", "resume", "stop") the
	// sandbox id; by is who asked, for the sandbox's record.
	Control(op, id, by string) error
	// Snapshot writes the output of the sandbox id to the file path.
	Snapshot(id, path string) error
	// Overlay is the input source and overlay upper dir of the sandbox id
	// (upper "" without an input overlay); ok is false if there is no such
	// sandbox.
	Overlay(id string) (lower, upper string, ok bool)
	// Refresh renews the instances of server (a rotated secret) and says
	// how many it renewed.
	Refresh(server string) int
}

// Options configure a Server.
type Options struct {
	// Config is the served config: rotate finds in it the servers that
	// declare a secret. Nil: no server declares any.
	Config *config.Config
	// Logger logs the server's failures. Nil: they are not logged.
	Logger *slog.Logger
}

// Server answers one instance's admin socket. Until Attach it answers
// every op but rotate's checks with "still starting".
type Server struct {
	opts Options
	path string
	ln   *net.UnixListener
	stop func() bool // the context's AfterFunc
	once sync.Once
	wg   sync.WaitGroup // the accept loop and every handler

	mu       sync.Mutex
	b        Backend                // guarded by mu
	ui       func() (string, error) // guarded by mu; see SetUI
	detached bool                   // guarded by mu
	conns    map[*net.UnixConn]bool // guarded by mu
	// using counts the handlers holding the back-end; Add only under mu
	// while not detached, so that Detach's Wait follows every Add.
	using sync.WaitGroup
}

// Serve listens on the admin socket at path until ctx ends or Close. A
// socket left by a crashed gateway is replaced; one a running process
// answers on is ErrBusy.
func Serve(ctx context.Context, path string, opts Options) (*Server, error) {
	if conn, err := instance.Dial(path, time.Second); err == nil {
		conn.Close()
		return nil, fmt.Errorf("%w (%s)", ErrBusy, path)
	}
	ln, err := listenPrivate(path, "admin")
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, path: path, ln: ln, conns: map[*net.UnixConn]bool{}}
	s.wg.Go(s.accept)
	s.stop = context.AfterFunc(ctx, func() { ln.Close() })
	return s, nil
}

// Attach gives the server its back-end once the gateway runs.
func (s *Server) Attach(b Backend) {
	s.mu.Lock()
	s.b = b
	s.mu.Unlock()
}

// Detach stops handing requests to the back-end and waits for the
// handlers using it: after it the back-end may close. The socket still
// answers (the instance stays live for the others of its state dir until
// Close), with "shutting down".
func (s *Server) Detach() {
	s.mu.Lock()
	s.detached = true
	s.mu.Unlock()
	s.using.Wait()
}

// acquire is the back-end for one handler (nil before Attach), and its
// release; errStopping once detached.
func (s *Server) acquire() (Backend, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached {
		return nil, nil, errStopping
	}
	s.using.Add(1)
	return s.b, s.using.Done, nil
}

// Close stops listening, removes the socket and waits for every handler
// (Detach first: after Close, too, no handler touches the back-end). A
// client still sending its request is cut off. Close is idempotent.
func (s *Server) Close() {
	s.Detach()
	s.once.Do(func() {
		s.stop()
		s.ln.Close()
		os.Remove(s.path)
		s.mu.Lock()
		for c := range s.conns {
			c.SetReadDeadline(time.Now())
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
}

func (s *Server) accept() {
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[conn] = true
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				conn.Close()
			}()
			s.handle(conn)
		})
	}
}

// handle answers the one request on conn.
func (s *Server) handle(conn *net.UnixConn) {
	enc := json.NewEncoder(conn)
	answer := func(r reply) {
		if err := enc.Encode(r); err != nil {
			s.opts.Logger.Debug("answering an admin request", "err", err)
		}
	}
	uid, err := checkPeer(conn)
	if err != nil {
		answer(reply{Error: err.Error()})
		return
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReaderSize(conn, 4096).ReadSlice('\n')
	if err != nil {
		answer(reply{Error: "bad request"})
		return
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		answer(reply{Error: "bad request: " + err.Error()})
		return
	}
	conn.SetReadDeadline(time.Time{})
	b, release, err := s.acquire()
	if err != nil {
		answer(reply{Error: err.Error()})
		return
	}
	r, err := s.dispatch(&call{req: req, who: fmt.Sprintf("cli:uid=%d", uid), b: b})
	release()
	if err != nil {
		r = reply{Error: err.Error()}
	}
	answer(r)
}

// dispatch runs the handler of the request's op.
func (s *Server) dispatch(c *call) (reply, error) {
	h, ok := handlers[c.req.Op]
	if c.b == nil && !h.early {
		return reply{}, errStarting
	}
	if !ok {
		return reply{}, fmt.Errorf("unknown op %q", c.req.Op)
	}
	r, err := h.serve(s, c)
	r.OK = err == nil
	return r, err
}
