package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestModernParamHeadersRepeated: an Mcp-Param header sent twice is
// refused. The check would read one value while an intermediary in
// front of the gateway may route on the other (or on both joined), which
// is what the headers must never let differ from the arguments.
func TestModernParamHeadersRepeated(t *testing.T) {
	a := &Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(func(Scope) *mcp.Server { return hiddenServer("a") }, nil, nil), Allow: []string{"*"}}
	url := serveHTTP(t, newGateway(t, a), HTTPOptions{})
	send := func(args string, regions ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__route","arguments":` + args + `,` + modernMeta + `}}`
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", ModernVersion)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "a__route")
		for _, r := range regions {
			req.Header.Add("Mcp-Param-Region", r)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return string(b)
	}
	for _, tc := range []struct {
		args    string
		regions []string
	}{
		{`{"region":"eu"}`, []string{"eu", "us"}},
		{`{"region":"eu"}`, []string{"eu", "eu"}},
		{`{}`, []string{"", "us"}},
	} {
		if body := send(tc.args, tc.regions...); strings.Contains(body, "routed") || !strings.Contains(body, "-32020") {
			t.Errorf("arguments %s with Mcp-Param-Region %q: %s; want the header-mismatch error and the tool not run", tc.args, tc.regions, body)
		}
	}
	if body := send(`{"region":"eu"}`, "eu"); !strings.Contains(body, "routed") {
		t.Errorf("one matching header: %s; want the tool run", body)
	}
}
