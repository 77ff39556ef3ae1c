package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Secrets against a hostile server (testdata/hostile): it sends its
// secrets out in every encoding and through every channel MCP has, and no
// form of them may reach the client, the gateway's log or its state dir.
// The forms are computed here, independently of internal/redact.

// TestSecretsGatewayHostile serves the hostile server with two secrets
// (TOKEN_A in its environment, FILE_B as /run/secrets/FILE_B) next to a
// second instance without secrets, drives every feature through `mcpbox
// serve --http`, and scans every byte the client received, everything
// its handlers were given, mcpbox's stderr and the state dir.
func TestSecretsGatewayHostile(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, version := range gwVersions {
			t.Run(version, func(t *testing.T) { hsGateway(t, m, version) })
		}
	})
}

// TestSecretsHostileEmitsEveryForm runs the hostile server without mcpbox
// and checks that it really sends every form the gateway test looks for,
// so that test cannot pass because a form was never sent.
func TestSecretsHostileEmitsEveryForm(t *testing.T) {
	a, b := hsSecret(t), hsSecret(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "FILE_B"), []byte(b+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(filepath.Join(goBuild(t, hostilePkg), "hostile"), "-secrets", dir)
	cmd.Env = []string{"TOKEN_A=" + a}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		gwReap(cmd)
	}()
	var wire lockedBuffer
	tr := &mcp.IOTransport{Reader: io.NopCloser(io.TeeReader(stdout, &wire)), Writer: stdin}
	c := newHSClient()
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "secrets-e2e", Version: "1"}, c.options()).
		Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: gwLegacy})
	if err != nil {
		t.Fatalf("connecting to the hostile server: %v", err)
	}
	// garbage would break a client without a gateway in front.
	hsExercise(t, ctx, sess, c, "", "garbage")
	gwClose(t, sess) // closes its stdin: the server exits
	gwReap(cmd)
	all := wire.String() + "\n" + stderr.String() + "\n" + c.text("")
	for _, f := range append(hsForms("TOKEN_A", a), hsForms("FILE_B", b)...) {
		if !strings.Contains(all, f.value) {
			t.Errorf("the hostile server never sent %s of %s (%q)", f.label, f.secret, f.value)
		}
	}
	// hostile__split sends no whole value in any one string: only joined
	// or unwrapped do its parts make one.
	split := c.text("tools/call split")
	for _, v := range []string{a, b} {
		if strings.Contains(split, v) || !strings.Contains(string(hsUnwrap(split)), v) {
			t.Errorf("split: the value %q is whole in one string, or not there when joined: %q", v, split)
		}
		std := base64.StdEncoding.EncodeToString([]byte(v))[:8*len(v)/6]
		if strings.Contains(split, std) || !strings.Contains(string(hsUnwrap(split)), std) {
			t.Errorf("split: base64 %q is not wrapped, or not there when unwrapped: %q", std, split)
		}
	}
}

// TestSecretsGatewayProviderFailure: a cmd: secret provider that fails or
// hangs makes initialize fail within a bound, with an error naming the
// secret, and no process of that server is ever started.
func TestSecretsGatewayProviderFailure(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		// The nonce, an extra fraction of a second for sleep and part of
		// the server's name, tells this test's processes from any other's.
		nonce := fmt.Sprintf("%09d", hsUint(t)%1_000_000_000)
		for _, tc := range []struct {
			name, secret, ref, want string
			bound                   time.Duration
		}{
			{"fails", "S_FAILS", "cmd:/bin/false", "exit status 1", 15 * time.Second},
			// secrets.DefaultCmdTimeout is 10 s.
			{"hangs", "S_HANGS", "cmd:/bin/sleep 600 0." + nonce, "no answer within", 30 * time.Second},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tag := "victim-" + tc.name + "-" + nonce
				dir := gwDir(t, m)
				g := gwServe(t, m, hsWriteConfig(t, m, dir, map[string]any{
					"victim": hsServer(goBuild(t, hostilePkg), tag, map[string]any{tc.secret: map[string]string{"from": tc.ref}}),
				}))
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				type connected struct {
					sess *mcp.ClientSession
					err  error
				}
				start := time.Now()
				done := make(chan connected, 1)
				go func() {
					sess, err := gwConnectErr(ctx, g.url, &http.Client{Transport: &http.Transport{}}, nil, gwLegacy)
					done <- connected{sess, err}
				}()
				// Meanwhile, what runs: the provider, never the server.
				during := map[string]bool{}
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				var c connected
			wait:
				for {
					select {
					case c = <-done:
						break wait
					case <-tick.C:
						for _, p := range hsProcs(t, nonce) {
							during[p] = true
						}
					}
				}
				took := time.Since(start)
				if c.err == nil {
					gwClose(t, c.sess)
					t.Fatalf("initialize succeeded with secret %s from %s", tc.secret, tc.ref)
				}
				err := c.err
				t.Logf("after %s: %v", took.Round(time.Millisecond), err)
				var sawProvider bool
				for p := range during {
					sawProvider = sawProvider || strings.Contains(p, "/bin/sleep 600 0."+nonce)
					if strings.Contains(p, tag) {
						t.Errorf("the server ran although its secret did not resolve: %s", p)
					}
				}
				if tc.name == "hangs" && !sawProvider {
					t.Errorf("never saw the hanging provider run (seen: %v): the process check would miss leftovers", during)
				}
				if msg := err.Error(); !strings.Contains(msg, tc.secret) || !strings.Contains(msg, tc.want) {
					t.Errorf("initialize error %q: want the secret's name %s and %q", msg, tc.secret, tc.want)
				}
				if took > tc.bound {
					t.Errorf("initialize failed after %s, want within %s", took, tc.bound)
				}
				if pids := hsProcs(t, nonce); len(pids) > 0 {
					t.Errorf("processes of this test still run after the failed start: %v", pids)
				}
				g.stop(t)
				if pids := hsProcs(t, nonce); len(pids) > 0 {
					t.Errorf("processes of this test outlive mcpbox: %v", pids)
				}
			})
		}
	})
}
