package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecretsRotate: `mcpbox secrets rotate` makes the running gateway
// renew the sandbox of the server with that secret: a new process (with
// the newly read value) answers afterwards.
func TestSecretsRotate(t *testing.T) {
	m := modes(t)[0]
	dir := m.dir(t)
	secretFile := filepath.Join(dir, "token")
	if err := os.WriteFile(secretFile, []byte(gwHex(16)), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := goBuild(t, gwServerPkg)
	cfg := hsWriteConfig(t, m, dir, map[string]any{"solo": map[string]any{
		"command":    []string{"/opt/bin/mcpserver", "-name", "solo"},
		"filesystem": map[string]any{"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}}},
		"secrets":    map[string]any{"API_TOKEN": map[string]any{"from": "file:" + secretFile, "as": "file"}},
		"tools":      map[string]any{"allow": []string{"*"}},
	}})
	g := gwServe(t, m, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
	before, err := gwCall(ctx, sess, "instance", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte(gwHex(16)), 0o600); err != nil {
		t.Fatal(err)
	}
	rotate := func(name string) result {
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		defer rcancel()
		cmd := m.command(rctx, "secrets", "rotate", name, "--config", cfg)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if err != nil {
			code = cmd.ProcessState.ExitCode()
		}
		return result{stdout: out.String(), stderr: errb.String(), code: code}
	}
	want(t, rotate("API_TOKEN"), 0, "renewed 1 sandbox(es) of solo")
	after, err := gwCall(ctx, sess, "instance", nil)
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatalf("the same process (%s) answers after rotate", after)
	}
	if r := rotate("NO_SUCH_SECRET"); r.code == 0 || !strings.Contains(r.stderr, "no server has a secret") {
		t.Fatalf("rotating an unknown secret: %s", r)
	}
	g.stop(t)
	if r := rotate("API_TOKEN"); r.code == 0 || !strings.Contains(r.stderr, "no mcpbox serve is running") {
		t.Fatalf("rotating with no gateway: %s", r)
	}
}
