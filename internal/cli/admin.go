package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
	"mcpbox/internal/guard"
	"mcpbox/internal/instance"
	"mcpbox/internal/integrity"
)

// adminSocket is where earlier versions had the one gateway's admin
// endpoint in its state dir; each instance now has its own
// (instance.SocketPath). Only the user who runs the gateway (or root) may
// connect to one.
const adminSocket = "admin.sock"

// adminRequest is one line a client sends; adminReply the line it gets.
type adminRequest struct {
	Op     string `json:"op"`
	Secret string `json:"secret,omitempty"` // rotate: NAME or SERVER/NAME
	ID     string `json:"id,omitempty"`     // decide, revoke: an approval or remembered decision
	Allow  bool   `json:"allow,omitempty"`  // decide
	Scope  string `json:"scope,omitempty"`  // decide: once, session or always
	Server string `json:"server,omitempty"` // pins, trust
	Key    string `json:"key,omitempty"`    // trust: a tool, "prompt:NAME" or "template:URI"; "" for all
	Path   string `json:"path,omitempty"`   // snapshot: the file to write
	// Hashes are the new definitions' hashes a trust was shown; another
	// pending definition is not trusted.
	Hashes []string `json:"hashes,omitempty"`
}

type adminReply struct {
	OK         bool                  `json:"ok"`
	Error      string                `json:"error,omitempty"`
	Servers    []string              `json:"servers,omitempty"`
	Instances  int                   `json:"instances"`
	Pending    []approval.Request    `json:"pending,omitempty"`
	Remembered []approval.Remembered `json:"remembered,omitempty"`
	Changes    []pinChange           `json:"changes,omitempty"`
	Sandboxes  []sandboxRow          `json:"sandboxes,omitempty"`
	// diff: a sandbox's input source and overlay upper dir.
	Lower string `json:"lower,omitempty"`
	Upper string `json:"upper,omitempty"`
	// stats: the gateway's goroutines, for leak checks (internal/load).
	Goroutines int `json:"goroutines,omitempty"`
}

// pinChange is a definition change as the admin commands show it.
type pinChange struct {
	Server  string `json:"server"`
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	Status  string `json:"status"`
	NewHash string `json:"new_hash,omitempty"`
	Diff    string `json:"diff,omitempty"`
	Name    string `json:"name,omitempty"` // as clients see it (see itemName)
}

// errStateDirBusy: another process answers on an instance's admin socket.
var errStateDirBusy = errors.New("another mcpbox serve answers on this admin socket")

// adminServer answers the admin socket for one gateway; gw and g are set
// once the gateway runs (attach).
type adminServer struct {
	c   *config.Config
	log *slog.Logger

	mu sync.Mutex
	gw *gateway.Gateway // guarded by mu
	g  *guard.Guard     // guarded by mu
}

func (a *adminServer) attach(gw *gateway.Gateway, g *guard.Guard) {
	a.mu.Lock()
	a.gw, a.g = gw, g
	a.mu.Unlock()
}

// serveAdmin listens on the instance's admin socket at path until ctx
// ends. A socket left by a crashed gateway is replaced; one a running
// process answers on is errStateDirBusy.
func serveAdmin(ctx context.Context, path string, a *adminServer) (func(), error) {
	if conn, err := instance.Dial(path, time.Second); err == nil {
		conn.Close()
		return nil, fmt.Errorf("%w (%s)", errStateDirBusy, path)
	}
	os.Remove(path)
	// The socket is made with no access for others from the start.
	old := unix.Umask(0o077)
	ln, err := instance.Listen(path)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go a.handle(conn.(*net.UnixConn))
		}
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	return func() {
		stop()
		ln.Close()
		os.Remove(path)
	}, nil
}

func (a *adminServer) handle(conn *net.UnixConn) {
	defer conn.Close()
	reply := func(r adminReply) { json.NewEncoder(conn).Encode(r) }
	uid, err := checkPeer(conn)
	if err != nil {
		reply(adminReply{Error: err.Error()})
		return
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReaderSize(conn, 4096).ReadSlice('\n')
	if err != nil {
		reply(adminReply{Error: "bad request"})
		return
	}
	var req adminRequest
	if err := json.Unmarshal(line, &req); err != nil {
		reply(adminReply{Error: "bad request: " + err.Error()})
		return
	}
	conn.SetReadDeadline(time.Time{})
	a.mu.Lock()
	gw, g := a.gw, a.g
	a.mu.Unlock()
	who := fmt.Sprintf("cli:uid=%d", uid)
	if req.Op == "rotate" {
		reply(a.rotate(gw, req.Secret))
		return
	}
	if g == nil {
		reply(adminReply{Error: "the gateway is still starting; try again"})
		return
	}
	switch req.Op {
	case "approvals":
		reply(approvalsReply(g))
	case "decide":
		if !g.ChannelOn(config.ChannelCLI) {
			reply(adminReply{Error: "the cli approval channel is off (approvals.channels)"})
			return
		}
		scope := cmpOr(req.Scope, approval.ScopeOnce)
		if err := g.Broker().Decide(req.ID, approval.Decision{Allow: req.Allow, Scope: scope, By: who}); err != nil {
			reply(adminReply{Error: err.Error()})
			return
		}
		reply(adminReply{OK: true})
	case "revoke":
		if err := g.Broker().Revoke(req.ID); err != nil {
			reply(adminReply{Error: err.Error()})
			return
		}
		g.Record(audit.Record{Event: audit.EventApproval, Decision: "revoked", Approver: who, Detail: map[string]string{"id": req.ID}})
		reply(adminReply{OK: true})
	case "pins":
		reply(adminReply{OK: true, Changes: namedChanges(g, g.PendingChanges(req.Server))})
	case "trust":
		changes, err := g.Trust(req.Server, req.Key, who, req.Hashes)
		if err != nil {
			reply(adminReply{Error: err.Error()})
			return
		}
		reply(adminReply{OK: true, Changes: namedChanges(g, changes)})
	case "ps":
		reply(adminReply{OK: true, Sandboxes: g.SandboxRows(gw)})
	case "stats":
		reply(adminReply{OK: true, Goroutines: runtime.NumGoroutine()})
	case "pause", "resume", "stop":
		if err := g.Control(gw, req.Op, req.ID); err != nil {
			reply(adminReply{Error: err.Error()})
			return
		}
		reply(adminReply{OK: true})
	case "snapshot":
		if err := g.Snapshot(gw, req.ID, req.Path); err != nil {
			reply(adminReply{Error: err.Error()})
			return
		}
		reply(adminReply{OK: true})
	case "diff":
		t := g.Sandbox(req.ID)
		switch {
		case t == nil:
			reply(adminReply{Error: fmt.Sprintf("no sandbox %q (see mcpbox ps)", req.ID)})
		case t.Upper == "":
			reply(adminReply{Error: fmt.Sprintf("sandbox %s has no input overlay (filesystem.input.mode: overlay)", req.ID)})
		default:
			reply(adminReply{OK: true, Lower: t.Lower, Upper: t.Upper})
		}
	case "reload":
		if err := g.ReloadPins(); err != nil {
			reply(adminReply{Error: err.Error()})
			return
		}
		g.Record(audit.Record{Event: audit.EventPolicyReload, Approver: who, Detail: map[string]string{"what": "lock file"}})
		reply(adminReply{OK: true})
	default:
		reply(adminReply{Error: fmt.Sprintf("unknown op %q", req.Op)})
	}
}

func (a *adminServer) rotate(gw *gateway.Gateway, secret string) adminReply {
	c := a.c
	servers := serversWithSecret(c, secret)
	if len(servers) == 0 {
		return adminReply{Error: fmt.Sprintf("no server has a secret %q", secret)}
	}
	for _, name := range servers {
		if s := c.Server(name); strings.HasPrefix(s.Placement, config.PlacementGroup) {
			return adminReply{Error: fmt.Sprintf("server %s is in %s: a group's shared sandbox cannot be renewed for one member's secret; restart serve", name, s.Placement)}
		}
	}
	if gw == nil {
		return adminReply{Error: "the gateway is still starting; try again"}
	}
	r := adminReply{OK: true, Servers: servers}
	for _, s := range servers {
		r.Instances += gw.Refresh(s)
	}
	return r
}

// showChanges renders pin changes with their diffs.
func showChanges(cs []integrity.Change) []pinChange {
	out := make([]pinChange, 0, len(cs))
	for _, c := range cs {
		out = append(out, pinChange{Server: c.Server, Kind: c.Kind, Key: c.Key, Status: c.Status, NewHash: c.NewHash, Diff: integrity.Diff(c)})
	}
	return out
}

// checkPeer admits the gateway's own user and root, and returns the
// peer's uid (who decided, for the audit).
func checkPeer(conn *net.UnixConn) (uint32, error) {
	cred, err := peerCred(conn)
	if err != nil {
		return 0, err
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Getuid() {
		return 0, errors.New("permission denied")
	}
	// Root, seen from an unprivileged gateway, is no sandbox of it (they run
	// as the gateway's user); and such a gateway may not read root's
	// namespaces below.
	if cred.Uid == 0 && os.Getuid() != 0 {
		return 0, nil
	}
	// A sandbox of this gateway runs as its user too (unprivileged mode),
	// but in a user namespace of its own: it may not steer the gateway.
	mine, err1 := os.Readlink("/proc/self/ns/user")
	theirs, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", cred.Pid))
	if err1 != nil || err2 != nil || mine != theirs {
		return 0, errors.New("permission denied")
	}
	return cred.Uid, nil
}

// serversWithSecret names the servers that declare secret (NAME, or
// SERVER/NAME as `mcpbox secrets` lists it).
func serversWithSecret(c *config.Config, secret string) []string {
	server, name, scoped := strings.Cut(secret, "/")
	if !scoped {
		name = secret
	}
	var out []string
	for _, s := range c.Servers {
		if scoped && s.Name != server {
			continue
		}
		for _, sec := range s.Secrets {
			if sec.Name == name && !slices.Contains(out, s.Name) {
				out = append(out, s.Name)
			}
		}
	}
	return out
}

// adminCallSocket sends one request to the gateway instance answering on
// sock in the state dir dir (adminCall finds them).
func adminCallSocket(dir, sock string, req adminRequest) (adminReply, error) {
	conn, err := instance.Dial(sock, 5*time.Second)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return adminReply{}, fmt.Errorf("no mcpbox serve is running on the state dir %s", dir)
		}
		return adminReply{}, err
	}
	defer conn.Close()
	// Whoever answers must be this user (or root): not a socket another
	// user left in a state dir we were pointed at.
	if uc, ok := conn.(*net.UnixConn); ok {
		if uid, err := peerUID(uc); err != nil || !trustedPeer(uid, dir) {
			return adminReply{}, fmt.Errorf("the admin socket in %s is not this user's gateway", dir)
		}
	}
	conn.SetDeadline(time.Now().Add(2 * time.Minute)) // a renewal starts sandboxes
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return adminReply{}, err
	}
	var r adminReply
	if err := json.NewDecoder(conn).Decode(&r); err != nil {
		return adminReply{}, fmt.Errorf("reading the gateway's answer: %w", err)
	}
	if r.Error != "" {
		return r, errors.New(r.Error)
	}
	return r, nil
}

// webSocket serves the approval broker's JSON endpoint (for a dashboard)
// in the state dir. It is a unix socket with the admin socket's checks, not
// a route of the MCP endpoint: an agent holding a client token must not be
// able to approve its own calls.
const webSocket = "approvals.sock"

// serveWeb serves h on the unix socket path (webSocketPath) until ctx
// ends.
func serveWeb(ctx context.Context, path string, h http.Handler) (func(), error) {
	os.Remove(path)
	old := unix.Umask(0o077)
	ln, err := instance.Listen(path)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("approvals socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("approvals socket: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(peerListener{ln})
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	return func() {
		stop()
		srv.Close()
		os.Remove(path)
	}, nil
}

// peerListener accepts only connections checkPeer admits.
type peerListener struct{ *net.UnixListener }

func (l peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if _, err := checkPeer(c); err != nil {
			c.Close()
			continue
		}
		return c, nil
	}
}

// peerUID is the uid of the process at the other end of conn.
func peerUID(conn *net.UnixConn) (uint32, error) {
	cred, err := peerCred(conn)
	if err != nil {
		return 0, err
	}
	return cred.Uid, nil
}

// peerCred is the SO_PEERCRED of conn: who is at the other end.
func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// trustedPeer reports whether a gateway running as uid may answer for the
// state dir: it is this user or root, or (for root) the dir's owner.
func trustedPeer(uid uint32, dir string) bool {
	me := os.Geteuid()
	if uid == 0 || int(uid) == me {
		return true
	}
	fi, err := os.Stat(dir)
	if err != nil || me != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uid
}
