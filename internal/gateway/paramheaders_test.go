package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hiddenServer is metaServer with a tool "hidden" (its "region" argument
// marked for an Mcp-Param-Region header) that it runs but leaves out of
// tools/list.
func hiddenServer(name string) *mcp.Server {
	s := metaServer(name)
	s.AddTool(&mcp.Tool{Name: "hidden", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("routed"), nil })
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				lr.Tools = slices.DeleteFunc(lr.Tools, func(t *mcp.Tool) bool { return t.Name == "hidden" })
			}
			return res, err
		}
	})
	return s
}

// TestModernParamHeadersFailClosed: the Mcp-Param-* check refuses what it
// cannot check instead of passing it: a tools/call that is a session's
// first request (nothing bound yet when the body is first read), a tool
// its server runs but does not list, arguments that name a key twice.
// Calls whose headers match still run.
func TestModernParamHeadersFailClosed(t *testing.T) {
	newURL := func() string {
		a := &Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(func(Scope) *mcp.Server { return hiddenServer("a") }, nil, nil), Allow: []string{"*"}}
		return serveHTTP(t, newGateway(t, a), HTTPOptions{})
	}
	call := func(name, args string) string {
		return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `,` + modernMeta + `}}`
	}
	hdr := func(name, region string) map[string]string {
		m := map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": name}
		if region != "" {
			m["Mcp-Param-Region"] = region
		}
		return m
	}
	refused := func(t *testing.T, status int, body string) {
		t.Helper()
		if strings.Contains(body, "routed") || !strings.Contains(body, "-32020") {
			t.Fatalf("status %d body %s: want the header-mismatch error and the tool not run", status, body)
		}
	}
	ran := func(t *testing.T, status int, body string) {
		t.Helper()
		if status != http.StatusOK || !strings.Contains(string(sseResult(t, body)), "routed") {
			t.Fatalf("status %d body %s: want the tool run", status, body)
		}
	}

	t.Run("first request of a session", func(t *testing.T) {
		status, body := post(t, newURL(), call("a__route", `{"region":"eu"}`), hdr("a__route", ""))
		refused(t, status, body)
		status, body = post(t, newURL(), call("a__route", `{"region":"eu"}`), hdr("a__route", "us"))
		refused(t, status, body)
		status, body = post(t, newURL(), call("a__route", `{"region":"eu"}`), hdr("a__route", "eu"))
		ran(t, status, body)
	})

	url := newURL()
	if status, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+modernMeta+`}}`,
		map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/list"}); status != http.StatusOK || strings.Contains(body, "a__hidden") {
		t.Fatalf("tools/list: %d %s", status, body)
	}
	t.Run("tool not in its server's list", func(t *testing.T) {
		status, body := post(t, url, call("a__hidden", `{"region":"eu"}`), hdr("a__hidden", ""))
		refused(t, status, body)
	})
	t.Run("key named twice", func(t *testing.T) {
		for _, region := range []string{"eu", "us"} {
			status, body := post(t, url, call("a__route", `{"region":"eu","region":"us"}`), hdr("a__route", region))
			refused(t, status, body)
		}
		status, body := post(t, url, call("a__route", `{"region":"eu","nested":{"a":1,"b":[{"a":2}]}}`), hdr("a__route", "eu"))
		ran(t, status, body)
	})
}

func TestDuplicateKey(t *testing.T) {
	for raw, want := range map[string]string{
		`{"a":1,"b":2}`:                       "",
		`{"a":{"a":1},"b":[{"a":1},{"a":2}]}`: "",
		`{"a":1,"a":2}`:                       "a",
		`{"x":{"k":[1,{"q":1,"q":2}]}}`:       "q",
		`{"x":{"k":1},"y":{"k":1,"k":2}}`:     "k",
		`[{"a":1},{"a":1}]`:                   "",
	} {
		k, dup := duplicateKey(json.RawMessage(raw))
		if dup != (want != "") || k != want {
			t.Errorf("duplicateKey(%s) = %q %v, want %q", raw, k, dup, want)
		}
	}
}

// TestParamHeaderRefusalToldUnknown: a 2026 call refused by the Mcp-Param
// check, on a session's first request (checked after binding) or a later
// one (checked before the SDK reads it), or refused by the SDK for its
// Mcp-Method or Mcp-Name header, is told to Hooks.Unknown once, so that
// the audit has its record; a call whose headers match is not.
func TestParamHeaderRefusalToldUnknown(t *testing.T) {
	whys := make(chan string, 8)
	a := &Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(func(Scope) *mcp.Server { return hiddenServer("a") }, nil, nil), Allow: []string{"*"}}
	gw, err := New([]*Server{a}, Options{Hooks: Hooks{Unknown: func(c *Call, why string) { whys <- c.Server + "/" + c.Tool + ": " + why }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	url := serveHTTP(t, gw, HTTPOptions{})
	callWith := func(method, name, region string) (int, string) {
		return post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__route","arguments":{"region":"eu"},`+modernMeta+`}}`,
			map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": method, "Mcp-Name": name, "Mcp-Param-Region": region})
	}
	call := func(region string) (int, string) { return callWith("tools/call", "a__route", region) }
	told := func(t *testing.T) {
		t.Helper()
		select {
		case got := <-whys:
			if want := "a/route: " + UnknownHeaderMismatch; got != want {
				t.Errorf("Unknown hook: %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the refused call reached no hook")
		}
	}
	for i := range 2 { // the first binds the session, the second finds it bound
		if status, body := call("us"); !strings.Contains(body, "-32020") {
			t.Fatalf("call %d with a mismatched header: %d %s", i, status, body)
		}
		told(t)
	}
	// Mcp-Method or Mcp-Name other than the body's, or missing: the SDK
	// refuses it.
	for _, h := range [][2]string{{"tools/list", "a__route"}, {"tools/call", "a__other"}, {"tools/call", ""}} {
		if status, body := callWith(h[0], h[1], "eu"); !strings.Contains(body, "-32020") {
			t.Fatalf("Mcp-Method %q, Mcp-Name %q: %d %s", h[0], h[1], status, body)
		}
		told(t)
	}
	// Params the SDK cannot read a name from (not a string): it refuses
	// the call for its Mcp-Name header.
	for _, c := range [][3]string{
		{`{"name":5,"arguments":{"region":"eu"},` + modernMeta + `}`, "5", "/"},
		{`{"name":{"n":"a__route"},` + modernMeta + `}`, "a__route", "/"},
	} {
		status, body := post(t, url, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":`+c[0]+`}`,
			map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": c[1], "Mcp-Param-Region": "eu"})
		if !strings.Contains(body, "-32020") {
			t.Fatalf("params %s: %d %s", c[0], status, body)
		}
		select {
		case got := <-whys:
			if want := c[2] + ": " + UnknownHeaderMismatch; got != want {
				t.Errorf("params %s: Unknown hook: %q, want %q", c[0], got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("params %s: the refused call reached no hook", c[0])
		}
	}
	// The go-sdk answers a call with no protocol version in its _meta, or
	// not the header's, before the session sees it: told after its answer.
	for _, c := range [][2]string{
		{`{"name":"a__route","arguments":{"region":"eu"}}`, "no _meta"},
		{`{"name":"a__route","arguments":{"region":"eu"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`, "another version"},
	} {
		status, body := post(t, url, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":`+c[0]+`}`,
			map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "a__route", "Mcp-Param-Region": "eu"})
		if status != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
			t.Fatalf("%s: %d %s", c[1], status, body)
		}
		select {
		case got := <-whys:
			if want := "a/route: " + UnknownProtocolRefused; got != want {
				t.Errorf("%s: Unknown hook: %q, want %q", c[1], got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the refused call reached no hook", c[1])
		}
	}
	// A key that differs from "name" only in case is not the name to the
	// SDK, nor to the check: the call runs, with one record (its own).
	if status, body := post(t, url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a__route","Name":"a__zzz","arguments":{"region":"eu"},`+modernMeta+`}}`,
		map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "a__route", "Mcp-Param-Region": "eu"}); status != http.StatusOK || strings.Contains(body, "-32020") {
		t.Fatalf("a case-variant Name key: %d %s", status, body)
	}
	if status, body := call("eu"); status != http.StatusOK || strings.Contains(body, "-32020") {
		t.Fatalf("call with a matching header: %d %s", status, body)
	}
	// A refused call is told after the SDK's answer (tellUnclaimed), so a
	// wrong tell may come just after the response: wait for it a little.
	select {
	case got := <-whys:
		t.Errorf("Unknown hook told of a call that ran, or twice of a refused one: %q", got)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestModernCallNoSessionToldUnknown: a 2026 tools/call that opens the
// client's gateway session, whose only server cannot start, is refused
// and told to Hooks.Unknown once.
func TestModernCallNoSessionToldUnknown(t *testing.T) {
	whys := make(chan string, 8)
	broken := func(context.Context, Scope) (*Process, error) { return nil, errors.New("no such command") }
	a := &Server{Name: "a", Prefix: "a__", Launch: broken, Allow: []string{"*"}, Restart: RestartNo}
	gw, err := New([]*Server{a}, Options{Hooks: Hooks{Unknown: func(c *Call, why string) { whys <- c.Name + ": " + why }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	url := serveHTTP(t, gw, HTTPOptions{})
	status, body := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__route","arguments":{},`+modernMeta+`}}`,
		map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "a__route"})
	if !strings.Contains(body, `"error"`) || !strings.Contains(body, "no such command") {
		t.Fatalf("a call whose session cannot open: %d %s", status, body)
	}
	select {
	case got := <-whys:
		if want := "a__route: " + UnknownNoSession; got != want {
			t.Errorf("Unknown hook: %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the refused call reached no hook")
	}
	select {
	case got := <-whys:
		t.Errorf("Unknown hook told twice: %q", got)
	case <-time.After(300 * time.Millisecond):
	}
}

// loginNeeded is a listing error with words for the client, as a remote
// server that needs a login gives (launch.AuthError).
type loginNeeded struct{}

func (loginNeeded) Error() string { return "GET tools: 401" }
func (loginNeeded) ClientMessage() string {
	return "server r needs authorization: run `mcpbox login r`"
}

// TestUnlistableSaysWhatToDo: a 2026 call whose headers cannot be checked
// because its server's tools cannot be listed tells the client what the
// listing's error says it can do (log in), as a 2025 client's call is
// told; before, it read only "listing the tools of server r failed".
func TestUnlistableSaysWhatToDo(t *testing.T) {
	b := &bound{srv: &Server{Name: "r"}}
	var werr *jsonrpc.Error
	if err := unlistable(b, fmt.Errorf("listing: %w", loginNeeded{})); !errors.As(err, &werr) || werr.Code != codeUnavailable || !strings.Contains(werr.Message, "mcpbox login r") {
		t.Errorf("a listing that needs a login: %v", err)
	}
	if err := unlistable(b, errors.New("EOF")); errors.As(err, &werr) || !strings.Contains(err.Error(), "listing the tools of server r failed") {
		t.Errorf("a listing that failed: %v", err)
	}
}

// TestInvalidParamHeaderToolsLeftOut: a server's tools whose
// x-mcp-header annotations no client could honour (a header name outside
// HTTP's token characters, one header for two arguments, a header on an
// object) are left out of the gateway's list and a 2026 call of one is
// refused; a
// boolean subschema beside an annotation does not make a tool invalid.
func TestInvalidParamHeaderToolsLeftOut(t *testing.T) {
	bad := map[string]string{
		"spaced":  `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Re gion"}}}`,
		"newline": `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region\r\nX-Evil: 1"}}}`,
		"twice":   `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"object","properties":{"c":{"type":"integer","x-mcp-header":"region"}}}}}`,
		"object":  `{"type":"object","properties":{"region":{"type":"object","x-mcp-header":"Region"}}}`,
		"number":  `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":5}}}`,
		"escaped": `{"type":"object","properties":{"region":{"type":"string","x-mcp-head\u0065r":"Re gion"}}}`,
	}
	good := `{"type":"object","properties":{"opts":{"type":"object","properties":{"any":true}},"region":{"type":"boolean","x-mcp-header":"Region"}}}`
	var ran atomic.Int64
	server := func(Scope) *mcp.Server {
		s := metaServer("a")
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if cr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && (bad[cr.Params.Name] != "" || cr.Params.Name == "good") {
					ran.Add(1)
					return text("ran " + cr.Params.Name), nil
				}
				res, err := next(ctx, method, req)
				if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
					// Added past AddTool, which would refuse them.
					for name, schema := range bad {
						lr.Tools = append(lr.Tools, &mcp.Tool{Name: name, InputSchema: json.RawMessage(schema)})
					}
					lr.Tools = append(lr.Tools, &mcp.Tool{Name: "good", InputSchema: json.RawMessage(good)})
				}
				return res, err
			}
		})
		return s
	}
	a := &Server{Name: "a", Prefix: "a__", Launch: sdkLauncher(server, nil, nil), Allow: []string{"*"}}
	url := serveHTTP(t, newGateway(t, a), HTTPOptions{})
	status, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+modernMeta+`}}`,
		map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/list"})
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if status != http.StatusOK || json.Unmarshal(sseResult(t, body), &list) != nil {
		t.Fatalf("tools/list: %d %s", status, body)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "a__good") || !slices.Contains(names, "a__route") {
		t.Fatalf("tools %v: want a__good and a__route listed", names)
	}
	for name := range bad {
		if slices.Contains(names, "a__"+name) {
			t.Errorf("tools %v: a__%s listed", names, name)
		}
		call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__` + name + `","arguments":{"region":"eu"},` + modernMeta + `}}`
		_, body := post(t, url, call, map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "a__" + name})
		if strings.Contains(body, "ran "+name) {
			t.Errorf("a__%s ran: %s", name, body)
		}
	}
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a__good","arguments":{"region":true},` + modernMeta + `}}`
	status, body = post(t, url, call, map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "a__good", "Mcp-Param-Region": "true"})
	if !strings.Contains(string(sseResult(t, body)), "ran good") || ran.Load() != 1 {
		t.Fatalf("a__good: %d %s (ran %d calls)", status, body, ran.Load())
	}
}
