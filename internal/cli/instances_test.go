package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/admin"
	"mcpbox/internal/approval"
	"mcpbox/internal/audit"
	"mcpbox/internal/config"
	"mcpbox/internal/daemon"
	"mcpbox/internal/instance"
	"mcpbox/internal/specconv"
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
	rec := admin.NewRecord(state, "", project, true, "")
	stop := startFake(t, rec)
	t.Cleanup(stop)
	return rec
}

// startFake starts a real instance (admin socket and record) of rec and
// returns what stops it; a test that starts another on the same state
// dir stops this one first (a record is keyed by the test's own pid).
func startFake(t *testing.T, rec instance.Record) (stop func()) {
	t.Helper()
	return startFakeWith(t, rec, nil)
}

// startFakeWith is startFake with b attached (nil: the instance answers
// "still starting" to what needs its gateway).
func startFakeWith(t *testing.T, rec instance.Record, b admin.Backend) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inst, err := admin.Start(ctx, rec, admin.InstanceOptions{Config: &config.Config{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if b != nil {
		inst.Attach(b)
	}
	return func() { inst.Close(); cancel() }
}

// waitingBackend is a gateway's admin backend with one call waiting for
// approval, apr; deciding it is recorded in decided.
type waitingBackend struct {
	admin.Backend
	apr     string
	decided chan string
}

func (b *waitingBackend) Approvals() ([]approval.Request, []approval.Remembered) {
	return []approval.Request{{ID: b.apr, Server: "fs", Tool: "write_file"}}, nil
}

func (b *waitingBackend) Sandboxes() []admin.Sandbox { return nil }

func (b *waitingBackend) Control(_, id, _ string) error {
	return fmt.Errorf("no sandbox %q (see mcpbox ps)", id)
}

func (b *waitingBackend) Decide(id string, d approval.Decision) error {
	if id != b.apr {
		return approval.ErrUnknown
	}
	b.decided <- id
	return nil
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
	if _, err := findStateDir(sub); err == nil || !strings.Contains(err.Error(), "mcpbox ps lists every running instance") {
		t.Fatalf("findStateDir with nothing run: %v, want an error pointing to ps", err)
	}
	// A state dir that `mcpbox run` of a package made in proj (its store
	// and lock file; no serve ever ran) does not make proj a project.
	runDir, err := specconv.ProjectStateDir("", proj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(runDir, "packages"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runDir, "mcpbox.lock"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := findStateDir(sub); err == nil || !strings.Contains(err.Error(), "mcpbox ps lists every running instance") {
		t.Fatalf("findStateDir after a run made a state dir: %v, want still no project", err)
	}
	t.Chdir(sub) // in no project, a command on an ID asks every instance
	if code, _, errOut := runCLI("deny", "apr_abc"); code != 1 || !strings.Contains(errOut, admin.ErrNoInstance.Error()) {
		t.Errorf("deny outside any served project, with no serve running: exit %d: %s; want %q", code, errOut, admin.ErrNoInstance)
	}
	if code, _, errOut := runCLI("logs"); code != exitUsage || !strings.Contains(errOut, "pass --config FILE or --state-dir DIR") {
		t.Errorf("logs outside any served project: exit %d: %s; want an error naming --config", code, errOut)
	}

	// The embedded default served in proj.
	def, err := specconv.ProjectStateDir("", proj)
	if err != nil {
		t.Fatal(err)
	}
	defRec := admin.NewRecord(def, "", proj, true, "127.0.0.1:7001")
	defRec.URL = "http://127.0.0.1:7001/mcp"
	stopDef := startFake(t, defRec)
	t.Cleanup(func() { stopDef() })
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
	keyed, err := specconv.ProjectStateDir(cfg, proj)
	if err != nil || keyed == def {
		t.Fatalf("the config's state dir %q (%v) is the default's", keyed, err)
	}
	if got, _ := findStateDir(sub); got != def {
		t.Errorf("findStateDir before the config's gateway runs = %q, want the live default's", got)
	}
	// Another process's serve of the config (a record may name any pid).
	keyedRec := admin.NewRecord(keyed, cfg, proj, true, "127.0.0.1:7002")
	keyedRec.PID, keyedRec.URL = os.Getppid(), "http://127.0.0.1:7002/mcp"
	keyedBackend := &waitingBackend{apr: "apr_0123456789abcdef", decided: make(chan string, 2)}
	t.Cleanup(startFakeWith(t, keyedRec, keyedBackend))
	// Both run: a command must be told which.
	var many *admin.ManyInstancesError
	if got, err := findStateDir(sub); !errors.As(err, &many) || !strings.Contains(err.Error(), keyed) || !strings.Contains(err.Error(), def) || !strings.Contains(err.Error(), "--config") {
		t.Errorf("findStateDir with the default and the config both served = %q, %v; want an error naming both state dirs", got, err)
	}
	// ps, which acts on neither, lists both, and a command on a sandbox
	// ID asks both (the ID picks one); logs is told to say which.
	t.Chdir(sub)
	if code, out, errOut := runCLI("ps", "--instances"); code != 0 || !strings.Contains(out, keyed) || !strings.Contains(out, def) {
		t.Errorf("ps with the default and the config both served: exit %d: %s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI("ps", "--instances", "--config", cfg); code != 0 || !strings.Contains(out, keyed) || strings.Contains(out, def) {
		t.Errorf("ps --config with the default and the config both served: exit %d: %s%s; want the config's only", code, out, errOut)
	}
	if code, _, errOut := runCLI("stop", "sbx_aaaaaaaaaaaaaaaa"); code != 1 || strings.Contains(errOut, "say which") {
		t.Errorf("stop of an unknown sandbox with the default and the config both served: exit %d: %s; want it asked of both", code, errOut)
	}
	// approvals lists what waits in each; approve finds its ID's instance.
	if code, out, errOut := runCLI("approvals"); code != 0 || !strings.Contains(out, keyedBackend.apr) {
		t.Errorf("approvals with the default and the config both served: exit %d: %s%s; want the config's waiting call", code, out, errOut)
	}
	if code, out, errOut := runCLI("approve", keyedBackend.apr); code != 0 || len(keyedBackend.decided) != 1 {
		t.Errorf("approve with the default and the config both served: exit %d: %s%s; want it decided in the config's instance", code, out, errOut)
	}
	if code, _, errOut := runCLI("logs"); code != exitUsage || !strings.Contains(errOut, "say which") {
		t.Errorf("logs with the default and the config both served: exit %d: %s", code, errOut)
	}
	// ui --instance PID names one serve, and so its config.
	for pid, port := range map[int]string{os.Getpid(): ":7001/", os.Getppid(): ":7002/"} {
		if code, out, errOut := runCLI("ui", "--print-url", "--instance", strconv.Itoa(pid)); code != 0 || !strings.Contains(out, port) {
			t.Errorf("ui --instance %d with the default and the config both served: exit %d: %s%s; want the dashboard at %s", pid, code, out, errOut, port)
		}
	}
	if code, _, errOut := runCLI("ui", "--print-url"); code != exitUsage || !strings.Contains(errOut, "say which") {
		t.Errorf("ui with the default and the config both served: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("ui", "--print-url", "--instance", "1"); code != exitUsage || !strings.Contains(errOut, "no mcpbox serve of yours has pid 1 (mcpbox ps --all") {
		t.Errorf("ui --instance of no serve with the default and the config both served: exit %d: %s", code, errOut)
	}
	// Outside the project, and in another one, the pid still names its
	// serve (ps --all lists it).
	elsewhere, another := filepath.Join(tmp, "elsewhere"), filepath.Join(tmp, "another")
	for _, d := range []string{elsewhere, another} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	anotherDir, err := specconv.ProjectStateDir("", another)
	if err != nil {
		t.Fatal(err)
	}
	stopAnother := startFake(t, admin.NewRecord(anotherDir, "", another, true, ""))
	for _, wd := range []string{elsewhere, another} {
		t.Chdir(wd)
		if code, out, errOut := runCLI("ui", "--print-url", "--instance", strconv.Itoa(os.Getppid())); code != 0 || !strings.Contains(out, ":7002/") {
			t.Errorf("ui --instance %d in %s: exit %d: %s%s; want the dashboard at :7002", os.Getppid(), wd, code, out, errOut)
		}
	}
	stopAnother()
	// A second record of that pid (planted where a sandbox can write):
	// neither is chosen.
	dup := admin.NewRecord(anotherDir, "", another, true, "127.0.0.1:7003")
	dup.PID, dup.URL = os.Getppid(), "http://127.0.0.1:7003/mcp"
	stopDup := startFake(t, dup)
	t.Chdir(elsewhere)
	if code, out, errOut := runCLI("ui", "--print-url", "--instance", strconv.Itoa(os.Getppid())); code != exitUsage || !strings.Contains(errOut, "records of pid") {
		t.Errorf("ui --instance %d with its pid in two state dirs: exit %d: %s%s; want a refusal naming both", os.Getppid(), code, out, errOut)
	}
	stopDup()
	// elsewhere is in no project: ps lists every instance, and a waiting
	// call's ID is found in the instance that holds it.
	if code, out, errOut := runCLI("ps", "--instances"); code != 0 || !strings.Contains(out, keyed) || !strings.Contains(out, def) {
		t.Errorf("ps --instances in no project: exit %d: %s%s; want every running instance", code, out, errOut)
	}
	if code, out, errOut := runCLI("approve", keyedBackend.apr); code != 0 || len(keyedBackend.decided) != 2 {
		t.Errorf("approve in no project: exit %d: %s%s; want it decided in the instance holding it", code, out, errOut)
	}

	t.Chdir(sub)
	stopDef()
	stopDef = func() {}
	if got, err := findStateDir(sub); err != nil || got != keyed {
		t.Errorf("findStateDir = %q, %v; want the config's %s", got, err, keyed)
	}
	// In no project, with one instance left: an unknown ID was asked of
	// every instance, so no hint says to ask them.
	t.Chdir(elsewhere)
	if code, _, errOut := runCLI("deny", "apr_0000000000000000"); code != 1 || !strings.Contains(errOut, "no such approval") || strings.Contains(errOut, "--all") {
		t.Errorf("deny of an unknown ID in no project: exit %d: %s; want it refused, with no hint to ask every project (it did)", code, errOut)
	}
	t.Chdir(sub)

	// A config's relative state_dir is its dir's.
	if err := os.WriteFile(cfg, []byte("version: 1\nstate_dir: ./st\nservers:\n  fs:\n    command: [node, s.js]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(proj, "st")
	liveFake(t, own, proj)
	if got, err := findStateDir(sub); err != nil || got != own {
		t.Errorf("findStateDir with state_dir ./st = %q, %v; want %s", got, err, own)
	}
	// A config of another name, served with --config, beside YAML that is
	// no mcpbox config.
	proj2 := filepath.Join(tmp, "proj2")
	os.Mkdir(proj2, 0o700)
	claude := filepath.Join(proj2, "claude.yaml")
	if err := os.WriteFile(claude, []byte("version: 1\nservers:\n  fs:\n    command: [node, s.js]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj2, "compose.yaml"), []byte("services: {web: {image: nginx}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	claudeDir, err := specconv.ProjectStateDir(claude, proj2)
	if err != nil {
		t.Fatal(err)
	}
	liveFake(t, claudeDir, proj2)
	if got, err := findStateDir(proj2); err != nil || got != claudeDir {
		t.Errorf("findStateDir with claude.yaml served = %q, %v; want its %s", got, err, claudeDir)
	}

	// Stopped: the nearest state dir a serve used is still found (its
	// audit log is read); one that a planted config names, made by
	// whoever planted it, is not.
	proj3 := filepath.Join(tmp, "proj3")
	planted := filepath.Join(proj3, "out", "st")
	if err := os.MkdirAll(planted, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj3, "evil.yaml"), []byte("version: 1\nstate_dir: ./out/st\nservers:\n  fs:\n    command: [node, s.js]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := findStateDir(proj3); err == nil {
		t.Errorf("findStateDir beside a planted config = %q; want none found", got)
	}
	stop := startFake(t, admin.NewRecord(planted, "", proj3, true, "")) // a serve of it, once
	stop()
	if got, err := findStateDir(proj3); err != nil || got != planted {
		t.Errorf("findStateDir of a stopped project = %q, %v; want %s", got, err, planted)
	}

	// The main: two projects never share a state dir.
	other := filepath.Join(tmp, "other")
	os.Mkdir(other, 0o700)
	if d, _ := specconv.ProjectStateDir("", other); d == def || !strings.HasPrefix(d, filepath.Join(tmp, "xdg", "mcpbox", "projects")+"/") {
		t.Errorf("another project's state dir: %s (first project's %s)", d, def)
	}
}

// psBackend is a gateway with the one sandbox sbx.
type psBackend struct {
	admin.Backend
	sbx string
}

func (b psBackend) Sandboxes() []admin.Sandbox {
	return []admin.Sandbox{{ID: b.sbx, State: "running", Server: "fs"}}
}

// fakeGateway serves an instance's admin socket and record as a gateway
// with the sandbox sbx would.
func fakeGateway(t *testing.T, state string, pid int, sbx string) {
	t.Helper()
	if err := instance.MakeDir(state); err != nil {
		t.Fatal(err)
	}
	srv, err := admin.Serve(context.Background(), instance.SocketPath(state, pid), admin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	srv.Attach(psBackend{sbx: sbx})
	if err := instance.Write(instance.Record{PID: pid, Started: time.Now(), StateDir: state, Project: "/p" + sbx, Transport: "stdio"}); err != nil {
		t.Fatal(err)
	}
}

// TestPSShowsEveryInstance: with two instances on one state dir, ps
// shows both with their sandboxes (package admin tests how a request
// finds its owner).
func TestPSShowsEveryInstance(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	state := filepath.Join(tmp, "s")
	fakeGateway(t, state, 101, "sbx_a")
	fakeGateway(t, state, 102, "sbx_b")

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
		var row admin.Sandbox
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
	fakeGateway(t, other, 103, "sbx_c")
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
}

// TestPSJSONNotes: ps --json prints sandbox lines only; what they cannot
// carry, a server an instance could not set up and an instance that did
// not list its sandboxes, is on stderr, where it used to be dropped.
func TestPSJSONNotes(t *testing.T) {
	state := filepath.Join(shortTemp(t), "s")
	fakeGateway(t, state, 201, "sbx_a")
	rec := instance.Record{PID: 201, Started: time.Now(), StateDir: state, Project: "/psbx_a", Transport: "stdio",
		Unavailable: map[string]string{"gh": "installing npm:nope@1: not found"}}
	if err := instance.Write(rec); err != nil {
		t.Fatal(err)
	}
	// An instance that takes the connection and answers nothing.
	ln, err := net.Listen("unix", instance.SocketPath(state, 202))
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
			c.Close()
		}
	}()
	if err := instance.Write(instance.Record{PID: 202, Started: time.Now(), StateDir: state, Project: "/mute", Transport: "http"}); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	if code := Main([]string{"ps", "--json", "--state-dir", state}, nil, &out, &errb); code != 0 {
		t.Fatalf("ps --json: %d %s", code, errb.String())
	}
	var row admin.Sandbox
	if err := json.Unmarshal(out.Bytes(), &row); err != nil || row.ID != "sbx_a" || row.Instance != 201 {
		t.Errorf("ps --json stdout: %v %+v, want the one sandbox line:\n%s", err, row, out.String())
	}
	for _, want := range []string{
		"mcpbox: ps: instance 201: server gh is unavailable: installing npm:nope@1: not found\n",
		"mcpbox: ps: instance 202 (/mute): its sandboxes could not be listed: ",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("ps --json stderr lacks %q:\n%s", want, errb.String())
		}
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

// findStateDir is the state dir admin commands given neither --config
// nor --state-dir use, for wd.
func findStateDir(wd string) (string, error) {
	return daemon.FindStateDir(wd, nil)
}
