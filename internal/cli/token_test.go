package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"mcpbox/internal/admin"
	"mcpbox/internal/bearer"
	"mcpbox/internal/instance"
	"mcpbox/internal/specconv"
)

func TestTokenRotateCommand(t *testing.T) {
	dir := t.TempDir()
	old, err := bearer.Token.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("token", "rotate", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("token rotate: exit %d: %s", code, errOut)
	}
	tok := strings.TrimSpace(out)
	if kept, err := bearer.Token.Read(dir); err != nil || kept != tok || tok == old {
		t.Fatalf("token rotate printed %q; file holds %q (%v); old %q", tok, kept, err, old)
	}
	if !strings.Contains(errOut, bearer.Token.Path(dir)) {
		t.Errorf("token rotate does not say where the token is: %s", errOut)
	}

	// A config with clients keeps its tokens in the config.
	cfg := filepath.Join(t.TempDir(), "mcpbox.yaml")
	os.WriteFile(cfg, []byte("version: 1\nstate_dir: "+dir+"\nclients: [{name: a, token: {from: env:X}}]\nservers: {s: {command: [x], tools: {allow: ['*']}}}\n"), 0o600)
	if code, _, errOut := runCLI("token", "rotate", "--config", cfg); code != exitUsage || !strings.Contains(errOut, "has clients") {
		t.Errorf("token rotate on a config with clients: exit %d: %s", code, errOut)
	}
	if kept, _ := bearer.Token.Read(dir); kept != tok {
		t.Errorf("token rotate on a config with clients changed the token file")
	}
	for _, args := range [][]string{{"token"}, {"token", "renew"}, {"token", "rotate", "extra", "--state-dir", dir}} {
		if code, _, _ := runCLI(args...); code != exitUsage {
			t.Errorf("mcpbox %v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestTokenRotateRefusesOthersDir: a state dir another user could write
// in is not one to keep a token in.
func TestTokenRotateRefusesOthersDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("token", "rotate", "--state-dir", dir); code != 1 || !strings.Contains(errOut, "writable by others") {
		t.Errorf("token rotate in a world-writable dir: exit %d: %s", code, errOut)
	}
	if _, err := os.Lstat(bearer.Token.Path(dir)); err == nil {
		t.Error("token rotate wrote a token into a world-writable dir")
	}
}

// TestLoginStatusNoOAuth: a config whose servers have no oauth says so on
// stderr rather than printing nothing, and exits 0.
func TestLoginStatusNoOAuth(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcpbox.yaml")
	yaml := "version: 1\nservers:\n  legacy:\n    url: http://127.0.0.1:9/sse\n    transport: sse\n    tools: {allow: [\"*\"]}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("login", "--status", "--config", cfg)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "no remote server (url) of the config has oauth") {
		t.Fatalf("login --status = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestTokenRotateFindsProject: without flags, token rotate in a project
// (or below it) whose serve runs with --config rotates the token that
// serve wants (the one mcpbox ps names), not the embedded default's of
// the current directory; where nothing has run it keeps to the default's.
func TestTokenRotateFindsProject(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	proj := filepath.Join(tmp, "proj")
	sub := filepath.Join(proj, "src")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	// Nothing has run: the embedded default's state dir of sub.
	subDef, err := specconv.ProjectStateDir("", sub)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("token", "rotate")
	if code != 0 {
		t.Fatalf("token rotate with nothing run: exit %d: %s", code, errOut)
	}
	if kept, _ := bearer.Token.Read(subDef); kept != strings.TrimSpace(out) {
		t.Errorf("token rotate with nothing run wrote %q into %s, printed %q", kept, subDef, out)
	}
	if !strings.Contains(errOut, "no serve runs on") {
		t.Errorf("token rotate with nothing run does not say no serve uses it: %s", errOut)
	}

	cfg := filepath.Join(proj, "mcpbox.yaml")
	if err := os.WriteFile(cfg, []byte("version: 1\nservers:\n  fs:\n    command: [node, s.js]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyed, err := specconv.ProjectStateDir(cfg, proj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(keyed, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := bearer.Token.Load(keyed)
	if err != nil {
		t.Fatal(err)
	}
	rec := liveFake(t, keyed, proj)
	for _, wd := range []string{proj, sub} {
		t.Chdir(wd)
		code, out, errOut := runCLI("token", "rotate")
		if code != 0 {
			t.Fatalf("token rotate in %s: exit %d: %s", wd, code, errOut)
		}
		tok := strings.TrimSpace(out)
		if kept, _ := bearer.Token.Read(keyed); kept != tok || tok == old {
			t.Errorf("token rotate in %s printed %q; the running serve's token file %s holds %q (old %q)", wd, tok, keyed, kept, old)
		}
		if !strings.Contains(errOut, fmt.Sprintf("pid %d", rec.PID)) {
			t.Errorf("token rotate in %s does not name the running serve: %s", wd, errOut)
		}
		old = tok
	}
	def, _ := specconv.ProjectStateDir("", proj)
	if fileExists(bearer.Token.Path(def)) {
		t.Errorf("token rotate in the project made a token for the embedded default's state dir %s, which no serve uses", def)
	}

	// The embedded default served there too: which token is meant is not
	// for token rotate to guess; it changes neither.
	liveFake(t, def, proj)
	code, _, errOut = runCLI("token", "rotate")
	if code != exitUsage || !strings.Contains(errOut, def) || !strings.Contains(errOut, keyed) {
		t.Errorf("token rotate with two configs served: exit %d: %s; want a refusal naming both state dirs", code, errOut)
	}
	if kept, _ := bearer.Token.Read(keyed); kept != old || fileExists(bearer.Token.Path(def)) {
		t.Error("token rotate with two configs served changed a token")
	}
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

// TestTokenRotateNotUsed: without flags, token rotate refuses, changing
// nothing, where the token file guards nothing: in a project whose config
// has clients (nothing running, or a stdio serve of it), and where the
// serve running on the state dir listens over HTTP without the token
// file (clients, --no-auth). It rotates where a running serve reads the
// file, and names that serve.
func TestTokenRotateNotUsed(t *testing.T) {
	tmp := shortTemp(t)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "xdg"))
	proj := filepath.Join(tmp, "proj")
	cfg := filepath.Join(proj, "mcpbox.yaml")
	if err := os.MkdirAll(proj, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("version: 1\nclients: [{name: a, token: {from: env:X}}]\nservers: {s: {command: [x], tools: {allow: ['*']}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state, err := specconv.ProjectStateDir(cfg, proj)
	if err != nil {
		t.Fatal(err)
	}
	if err := instance.MakeDir(state); err != nil { // as a serve that ran leaves it
		t.Fatal(err)
	}
	t.Chdir(proj)
	if code, _, errOut := runCLI("token", "rotate"); code != exitUsage || !strings.Contains(errOut, cfg+" has clients") {
		t.Errorf("token rotate in a stopped project with clients: exit %d: %s", code, errOut)
	}
	if fileExists(bearer.Token.Path(state)) {
		t.Fatalf("token rotate in a project with clients made a token file %s", bearer.Token.Path(state))
	}

	// A stdio serve of that config: the token file guards nothing there.
	stop := startFake(t, admin.NewRecord(state, cfg, proj, true, ""))
	code, _, errOut := runCLI("token", "rotate")
	stop()
	if code != exitUsage || !strings.Contains(errOut, cfg+" has clients") {
		t.Errorf("token rotate with a stdio serve of a config with clients: exit %d: %s", code, errOut)
	}

	rec := admin.NewRecord(state, cfg, proj, false, "127.0.0.1:1")
	rec.URL = "http://127.0.0.1:1/mcp"
	stop = startFake(t, rec)
	// Named by --state-dir, so that the running serve's record decides.
	code, _, errOut = runCLI("token", "rotate", "--state-dir", state)
	stop()
	if code != 1 || !strings.Contains(errOut, "does not use the token file") || !strings.Contains(errOut, fmt.Sprintf("pid %d", rec.PID)) {
		t.Errorf("token rotate with a serve without the token file: exit %d: %s", code, errOut)
	}
	if fileExists(bearer.Token.Path(state)) {
		t.Fatalf("token rotate with a serve without the token file made %s", bearer.Token.Path(state))
	}

	rec.TokenFile = bearer.Token.Path(state)
	stop = startFake(t, rec)
	defer stop()
	code, out, errOut := runCLI("token", "rotate")
	if code != 0 || !strings.Contains(errOut, "accepts it from its next request") {
		t.Fatalf("token rotate with a serve that reads the token file: exit %d: %s", code, errOut)
	}
	if kept, _ := bearer.Token.Read(state); kept != strings.TrimSpace(out) {
		t.Errorf("token rotate printed %q; %s holds %q", out, bearer.Token.Path(state), kept)
	}

	// Two serves read it: both are named (an instance is known by its
	// socket; the pid only names it).
	other := rec
	other.PID = rec.PID + 1<<20
	stopOther := startFake(t, other)
	defer stopOther()
	if code, _, errOut := runCLI("token", "rotate"); code != 0 || !strings.Contains(errOut, fmt.Sprintf("the running serves on %s (pids ", state)) ||
		!strings.Contains(errOut, strconv.Itoa(rec.PID)) || !strings.Contains(errOut, strconv.Itoa(other.PID)) {
		t.Errorf("token rotate with two serves that read the token file: exit %d: %s", code, errOut)
	}
}
