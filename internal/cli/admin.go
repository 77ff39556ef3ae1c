package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
)

// adminSocket is the running gateway's admin endpoint in its state dir.
// Only the user who runs the gateway (or root) may connect.
const adminSocket = "admin.sock"

// adminRequest is one line a client sends; adminReply the line it gets.
type adminRequest struct {
	Op     string `json:"op"`
	Secret string `json:"secret,omitempty"` // rotate: NAME or SERVER/NAME
}

type adminReply struct {
	OK        bool     `json:"ok"`
	Error     string   `json:"error,omitempty"`
	Servers   []string `json:"servers,omitempty"`
	Instances int      `json:"instances"`
}

// errStateDirBusy: another gateway answers on the state dir's socket.
var errStateDirBusy = errors.New("another mcpbox serve is using this state dir")

// serveAdmin listens on the state dir's admin socket until ctx ends. A
// socket left by a crashed gateway is replaced; one a running gateway
// answers on is errStateDirBusy (two gateways would share workspaces).
func serveAdmin(ctx context.Context, dir string, c *config.Config, gw *gateway.Gateway) (func(), error) {
	path := filepath.Join(dir, adminSocket)
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return nil, fmt.Errorf("%w (%s)", errStateDirBusy, dir)
	}
	os.Remove(path)
	// The socket is made with no access for others from the start.
	old := unix.Umask(0o077)
	ln, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go handleAdmin(conn.(*net.UnixConn), c, gw)
		}
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	return func() {
		stop()
		ln.Close()
		os.Remove(path)
	}, nil
}

func handleAdmin(conn *net.UnixConn, c *config.Config, gw *gateway.Gateway) {
	defer conn.Close()
	reply := func(r adminReply) { json.NewEncoder(conn).Encode(r) }
	if err := checkPeer(conn); err != nil {
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
	switch req.Op {
	case "rotate":
		servers := serversWithSecret(c, req.Secret)
		if len(servers) == 0 {
			reply(adminReply{Error: fmt.Sprintf("no server has a secret %q", req.Secret)})
			return
		}
		for _, name := range servers {
			if s := c.Server(name); strings.HasPrefix(s.Placement, config.PlacementGroup) {
				reply(adminReply{Error: fmt.Sprintf("server %s is in %s: a group's shared sandbox cannot be renewed for one member's secret; restart serve", name, s.Placement)})
				return
			}
		}
		r := adminReply{OK: true, Servers: servers}
		for _, s := range servers {
			r.Instances += gw.Refresh(s)
		}
		reply(r)
	default:
		reply(adminReply{Error: fmt.Sprintf("unknown op %q", req.Op)})
	}
}

// checkPeer admits the gateway's own user and root.
func checkPeer(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Getuid() {
		return errors.New("permission denied")
	}
	// A sandbox of this gateway runs as its user too (unprivileged mode),
	// but in a user namespace of its own: it may not steer the gateway.
	mine, err1 := os.Readlink("/proc/self/ns/user")
	theirs, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", cred.Pid))
	if err1 != nil || err2 != nil || mine != theirs {
		return errors.New("permission denied")
	}
	return nil
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

// adminCall sends one request to the gateway running on dir.
func adminCall(dir string, req adminRequest) (adminReply, error) {
	conn, err := net.DialTimeout("unix", filepath.Join(dir, adminSocket), 5*time.Second)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return adminReply{}, fmt.Errorf("no mcpbox serve is running on the state dir %s", dir)
		}
		return adminReply{}, err
	}
	defer conn.Close()
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
