package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/instance"
)

// shortTemp is a temp dir with a short path: unix socket paths are
// limited to 108 bytes.
func shortTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "mcpbox-inst-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// liveFake starts a real instance (admin socket and record) on state.
func liveFake(t *testing.T, state, project string) instance.Record {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rec := newRecord(state, "", project, true, "")
	inst, err := startInstance(ctx, &adminServer{c: &config.Config{}}, rec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.close(); cancel() })
	return rec
}

// TestFindStateDir: with no flags, an admin command in a project (or
// below it) finds the state dir of the project's running instance: its
// config's (state_dir, or keyed by the config file), else the embedded
// default's for that directory.
func TestFindStateDir(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	proj := filepath.Join(tmp, "proj")
	sub := filepath.Join(proj, "a", "b")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := findStateDir(sub); err == nil || !strings.Contains(err.Error(), "--all") {
		t.Fatalf("findStateDir with nothing run: %v, want an error pointing to --all", err)
	}

	// The embedded default served in proj.
	def, err := projectStateDir("", proj)
	if err != nil {
		t.Fatal(err)
	}
	liveFake(t, def, proj)
	for _, wd := range []string{proj, sub} {
		if got, err := findStateDir(wd); err != nil || got != def {
			t.Errorf("findStateDir(%s) = %q, %v; want the default's %s", wd, got, err, def)
		}
	}

	// A config in proj wins once its gateway runs.
	cfg := filepath.Join(proj, "mcpbox.yaml")
	if err := os.WriteFile(cfg, []byte("version: 1\nservers:\n  fs:\n    command: [node, s.js]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyed, err := projectStateDir(cfg, proj)
	if err != nil || keyed == def {
		t.Fatalf("the config's state dir %q (%v) is the default's", keyed, err)
	}
	if got, _ := findStateDir(sub); got != def {
		t.Errorf("findStateDir before the config's gateway runs = %q, want the live default's", got)
	}
	liveFake(t, keyed, proj)
	if got, err := findStateDir(sub); err != nil || got != keyed {
		t.Errorf("findStateDir = %q, %v; want the config's %s", got, err, keyed)
	}

	// A config's relative state_dir is its dir's.
	if err := os.WriteFile(cfg, []byte("version: 1\nstate_dir: ./st\nservers:\n  fs:\n    command: [node, s.js]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(proj, "st")
	liveFake(t, own, proj)
	if got, err := findStateDir(sub); err != nil || got != own {
		t.Errorf("findStateDir with state_dir ./st = %q, %v; want %s", got, err, own)
	}
	// The main: two projects never share a state dir.
	other := filepath.Join(tmp, "other")
	os.Mkdir(other, 0o700)
	if d, _ := projectStateDir("", other); d == def || !strings.HasPrefix(d, filepath.Join(tmp, "xdg", "mcpbox", "projects")+"/") {
		t.Errorf("another project's state dir: %s (first project's %s)", d, def)
	}
}

// fakeGateway answers admin requests on an instance's socket as a
// gateway owning the sandbox sbx and the approval apr would.
func fakeGateway(t *testing.T, state string, pid int, sbx, apr string) {
	t.Helper()
	if err := instance.MakeDir(state); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", instance.SocketPath(state, pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadBytes('\n')
				if err != nil {
					return
				}
				var req adminRequest
				json.Unmarshal(line, &req)
				r := adminReply{OK: true}
				switch req.Op {
				case "ps":
					r.Sandboxes = []sandboxRow{{ID: sbx, State: "running", Server: "fs"}}
				case "approvals":
					r.Pending = []approval.Request{{ID: apr}}
					r.Remembered = []approval.Remembered{{ID: "apr_always"}}
				case "stop", "decide":
					if req.ID != sbx && req.ID != apr {
						r = adminReply{Error: fmt.Sprintf("no sandbox %q (see mcpbox ps)", req.ID)}
					} else {
						r.Servers = []string{sbx}
					}
				}
				json.NewEncoder(c).Encode(r)
			}()
		}
	}()
	if err := instance.Write(instance.Record{PID: pid, Started: time.Now(), StateDir: state, Project: "/p" + sbx, Transport: "stdio"}); err != nil {
		t.Fatal(err)
	}
}

// TestAdminCallFindsTheOwner: with two instances on one state dir, a
// request about a sandbox or approval reaches the instance that has it,
// listings gather both, and ps shows both with their sandboxes.
func TestAdminCallFindsTheOwner(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	state := filepath.Join(tmp, "s")
	fakeGateway(t, state, 101, "sbx_a", "apr_a")
	fakeGateway(t, state, 102, "sbx_b", "apr_b")
	for _, id := range []string{"sbx_a", "sbx_b"} {
		r, err := adminCall(state, adminRequest{Op: "stop", ID: id})
		if err != nil || len(r.Servers) != 1 || r.Servers[0] != id {
			t.Errorf("stop %s: %+v, %v; want the owner's answer", id, r, err)
		}
	}
	if _, err := adminCall(state, adminRequest{Op: "stop", ID: "sbx_none"}); err == nil || !strings.Contains(err.Error(), `no sandbox "sbx_none"`) {
		t.Errorf("stop of an unknown sandbox: %v", err)
	}
	r, err := adminCall(state, adminRequest{Op: "approvals"})
	if err != nil || len(r.Pending) != 2 || len(r.Remembered) != 1 {
		t.Errorf("approvals: %+v, %v; want both pending requests and one remembered", r, err)
	}

	var out, errb bytes.Buffer
	if code := Main([]string{"ps", "--state-dir", state}, nil, &out, &errb); code != 0 {
		t.Fatalf("ps: %d %s", code, errb.String())
	}
	for _, want := range []string{"101", "102", "sbx_a", "sbx_b", "/psbx_a", "stdio"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ps output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := Main([]string{"ps", "--json", "--state-dir", state}, nil, &out, &errb); code != 0 {
		t.Fatalf("ps --json: %d %s", code, errb.String())
	}
	owners := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var row sandboxRow
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("ps --json line %q: %v", line, err)
		}
		owners[row.ID] = row.Instance
	}
	if owners["sbx_a"] != 101 || owners["sbx_b"] != 102 {
		t.Errorf("ps --json owners: %v", owners)
	}

	// --all: through the registry, from anywhere.
	root, _ := instance.Root()
	other := filepath.Join(tmp, "o")
	fakeGateway(t, other, 103, "sbx_c", "apr_c")
	for _, d := range []string{state, other} {
		if err := instance.Register(root, d); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if code := Main([]string{"ps", "--all", "--instances", "--json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("ps --all: %d %s", code, errb.String())
	}
	if n := strings.Count(out.String(), `"id":`); n != 3 {
		t.Errorf("ps --all --instances lists %d instances, want 3:\n%s", n, out.String())
	}
	if _, err := adminCall(allStateDirs, adminRequest{Op: "stop", ID: "sbx_c"}); err != nil {
		t.Errorf("stop --all of another state dir's sandbox: %v", err)
	}
}

// TestLogsVerifyTwoWriters: two gateways on one state dir write the audit
// log at the same time; `mcpbox logs verify` finds one intact chain.
func TestLogsVerifyTwoWriters(t *testing.T) {
	state := t.TempDir()
	path := filepath.Join(state, "audit.db")
	var stores []*audit.Store
	for range 2 {
		s, err := audit.Open(audit.Options{Path: path, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 10 {
		for i, s := range stores {
			s.Add(audit.Record{Event: audit.EventCall, Client: fmt.Sprint("writer", i), Tool: fmt.Sprint("t", round)})
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"logs", "verify", "--state-dir", state}, nil, &out, &errb); code != 0 {
		t.Fatalf("logs verify: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := Main([]string{"logs", "--json", "--state-dir", state}, nil, &out, &errb); code != 0 || strings.Count(out.String(), "\n") != 20 {
		t.Errorf("logs: exit %d, %d lines, want 20", code, strings.Count(out.String(), "\n"))
	}
}

// TestAddrInUseNamesTheInstance: a listen that fails because the port is
// taken says which instance (its project) holds it and how to get a free
// port; other errors pass unchanged.
func TestAddrInUseNamesTheInstance(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, lerr := net.Listen("tcp", addr)
	if lerr == nil {
		t.Fatal("a second listen on a taken port succeeded")
	}
	err = explainAddrInUse(addr, lerr)
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(err.Error(), "--http 127.0.0.1:0") {
		t.Errorf("error: %v; want this process's pid and --http 127.0.0.1:0", err)
	}
	// As an mcpbox instance (a record of this pid): its project.
	state := filepath.Join(tmp, "s")
	rec := liveFake(t, state, "/some/project")
	root, _ := instance.Root()
	if err := instance.Register(root, state); err != nil {
		t.Fatal(err)
	}
	err = explainAddrInUse(addr, lerr)
	if want := fmt.Sprintf("mcpbox serve pid %d of project /some/project", rec.PID); !strings.Contains(err.Error(), want) {
		t.Errorf("error: %v; want %q", err, want)
	}
	other := errors.New("permission denied")
	if got := explainAddrInUse(addr, other); got != other {
		t.Errorf("another error became %v", got)
	}
}

// TestStartSparesLiveSessions: an instance that starts while another
// runs on the state dir must not remove the session workspaces (it cannot
// tell the live one's from a crashed one's); one that starts alone
// removes them, as it removes a dead instance's record and socket.
func TestStartSparesLiveSessions(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	state := filepath.Join(tmp, "s")
	session := filepath.Join(state, "workspaces", "_local", "srv", "sessions", "s1")
	if err := os.MkdirAll(session, 0o700); err != nil {
		t.Fatal(err)
	}
	// A dead instance's leftovers: a record and a socket nobody serves.
	if err := instance.Write(instance.Record{PID: 999999, StateDir: state}); err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("unix", instance.SocketPath(state, 999999))
	if err != nil {
		t.Fatal(err)
	}
	dead.(*net.UnixListener).SetUnlinkOnClose(false)
	dead.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	first, err := startInstance(ctx, &adminServer{c: &config.Config{}}, newRecord(state, "", tmp, true, ""), log)
	if err != nil {
		t.Fatal(err)
	}
	defer first.close()
	if _, err := os.Stat(session); err == nil {
		t.Fatal("the first instance, alone, kept the crashed one's session workspace")
	}
	if recs, _ := instance.List(state); len(recs) != 1 || first.shared {
		t.Errorf("after a lone start: %d live records, shared %v; want 1, false", len(recs), first.shared)
	}
	for _, p := range []string{instance.SocketPath(state, 999999), strings.TrimSuffix(instance.SocketPath(state, 999999), ".sock") + ".json"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the dead instance's %s is still there", p)
		}
	}

	// The first instance now has a session; a second one starts.
	if err := os.MkdirAll(session, 0o700); err != nil {
		t.Fatal(err)
	}
	// Another pid's record: this test process can only be one instance.
	rec := newRecord(state, "", tmp, false, "127.0.0.1:0")
	rec.PID = os.Getpid() + 100000
	second, err := startInstance(ctx, &adminServer{c: &config.Config{}}, rec, log)
	if err != nil {
		t.Fatal(err)
	}
	defer second.close()
	if _, err := os.Stat(session); err != nil {
		t.Errorf("a second instance removed the live instance's session workspace: %v", err)
	}
	if !second.shared {
		t.Error("the second instance did not see the first")
	}
	if recs, _ := instance.List(state); len(recs) != 2 {
		t.Errorf("%d live records, want 2", len(recs))
	}
	second.close()
	if recs, _ := instance.List(state); len(recs) != 1 {
		t.Errorf("after the second closed: %d live records, want 1", len(recs))
	}
}
