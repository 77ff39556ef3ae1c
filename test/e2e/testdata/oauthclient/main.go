// Command oauthclient is the client the conformance suite's
// authorization scenarios drive in TestOAuthConformanceThroughServe: it
// puts the scenario's server (the last argument) behind mcpbox as a
// remote server with oauth, logs in with `mcpbox login --no-browser`
// (following the printed URL as a browser would; the suite's server
// approves at once), then calls test-tool through `mcpbox serve --stdio`.
// MCPBOX_BIN names the mcpbox binary.
//
// It configures what a user would: with a client secret, the issuer the
// client is registered at (mcpbox requires it; here read from the
// server's metadata, as a user would look it up); for auth/scope-step-up,
// step_up_scopes naming the scope the scenario's write call needs, which
// serve may then add without a person.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/oauth"
)

func main() {
	if err := run(os.Args[len(os.Args)-1]); err != nil {
		fmt.Fprintln(os.Stderr, "oauthclient:", err)
		os.Exit(1)
	}
}

func run(serverURL string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	bin := os.Getenv("MCPBOX_BIN")
	dir, err := os.MkdirTemp("", "oauthclient-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var cc struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if s := os.Getenv("MCP_CONFORMANCE_CONTEXT"); s != "" {
		json.Unmarshal([]byte(s), &cc)
	}
	o := map[string]any{"client_metadata_url": "https://conformance-test.local/client-metadata.json"}
	env := append(os.Environ(), "CC_CLIENT_ID="+cc.ClientID, "CC_CLIENT_SECRET="+cc.ClientSecret)
	if cc.ClientID != "" {
		o["client_id"] = map[string]string{"from": "env:CC_CLIENT_ID"}
	}
	if cc.ClientSecret != "" {
		o["client_secret"] = map[string]string{"from": "env:CC_CLIENT_SECRET"}
		d, err := oauth.Discover(ctx, nil, serverURL, oauth.Challenge{})
		if err != nil {
			return fmt.Errorf("finding the issuer for client_secret: %w", err)
		}
		o["issuer"] = d.Server.Issuer
	}
	if os.Getenv("MCP_CONFORMANCE_SCENARIO") == "auth/scope-step-up" {
		o["step_up_scopes"] = []string{"mcp:write"}
	}
	// The scenario's test-tool declares no annotations, which would hold
	// its call for a person's review; the suite tests authorization.
	tools := map[string]any{"allow": []string{"*"}, "approve_annotations": []string{}}
	cfg := map[string]any{"version": 1, "state_dir": filepath.Join(dir, "state"), "servers": map[string]any{
		"s": map[string]any{"url": serverURL, "oauth": o, "tools": tools, "pin": "off"},
	}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "mcpbox.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	if err := login(ctx, bin, path, env); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "serve", "--stdio", "--config", path)
	cmd.Env, cmd.Stderr = env, os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpbox-oauth-conformance", Version: "0"}, nil)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("connecting to mcpbox serve: %w", err)
	}
	defer sess.Close()
	if _, err := sess.ListTools(ctx, nil); err != nil {
		return fmt.Errorf("listing tools: %w", err)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "test-tool", Arguments: map[string]any{}})
	if err == nil && res.IsError {
		err = errors.New("tool error")
	}
	if err != nil {
		return fmt.Errorf("calling test-tool: %w", err)
	}
	return nil
}

// login runs mcpbox login --no-browser and opens the URL it prints first.
func login(ctx context.Context, bin, cfg string, env []string) error {
	cmd := exec.CommandContext(ctx, bin, "login", "s", "--no-browser", "--config", cfg)
	cmd.Env, cmd.Stderr = env, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err == nil {
		hc := &http.Client{Timeout: 10 * time.Second}
		if resp, err := hc.Get(strings.TrimSpace(line)); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("mcpbox login: %w", err)
	}
	return nil
}
