package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// rpcAnswer is the one JSON-RPC response in an SSE or JSON body.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// postRPC sends one message to url and returns the status, the
// Content-Type, the Mcp-Session-Id and the JSON-RPC answer, if any.
func postRPC(t *testing.T, url, body string, headers map[string]string) (status int, ctype, sid string, a rpcAnswer) {
	t.Helper()
	status, h, data := postFull(t, url, body, headers)
	for line := range strings.Lines(data) {
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.TrimSpace(d) != "" {
			data = d
		}
	}
	json.Unmarshal([]byte(data), &a)
	return status, h.Get("Content-Type"), h.Get("Mcp-Session-Id"), a
}

// TestHTTPInvalidAnsweredAsJSONRPC: over Streamable HTTP, a message the
// go-sdk would drop (an id and nothing else), a call of an unknown
// method, params or arguments that are no object and a call without the
// session's Mcp-Session-Id are each answered with a JSON-RPC error under
// the request's id, with its proper code and no Go type names, in both
// eras where they apply; the session goes on.
func TestHTTPInvalidAnsweredAsJSONRPC(t *testing.T) {
	_, url := modernGateway(t, HTTPOptions{})
	const legacy = "2025-11-25"
	status, _, sid, a := postRPC(t, url, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+legacy+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	if status != http.StatusOK || sid == "" || a.Result == nil {
		t.Fatalf("initialize: status %d, session %q, %+v", status, sid, a)
	}
	inSession := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": legacy}
	if status, _, _, _ := postRPC(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, inSession); status != http.StatusAccepted {
		t.Fatalf("initialized: status %d", status)
	}
	modern := map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "a__echo"}
	tests := []struct {
		name    string
		body    string
		headers map[string]string
		status  int // 0: the SDK's to choose
		code    int64
		want    string // in the message
	}{
		{"id only", `{"jsonrpc":"2.0","id":7}`, inSession, 400, -32600, "not a JSON-RPC 2.0 request"},
		{"id only, 2026", `{"jsonrpc":"2.0","id":7}`, modern, 400, -32600, "not a JSON-RPC 2.0 request"},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"foo/bar"}`, inSession, 400, -32601, `"foo/bar"`},
		{"initialize params a string", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":"x"}`, nil, 200, -32602, `"params" must be an object`},
		{"tools/list params an array", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[1]}`, inSession, 200, -32602, `"params" must be an object`},
		{"arguments a string", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__echo","arguments":"f.txt"}}`, inSession, 200, -32602, `"arguments" must be an object`},
		{"arguments a string, 2026", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__echo","arguments":"f.txt",` + modernMeta + `}}`, modern, 0, -32602, `"arguments" must be an object`},
		{"no session header", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, map[string]string{"MCP-Protocol-Version": legacy}, 400, -32600, "Mcp-Session-Id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, ctype, _, a := postRPC(t, url, tt.body, tt.headers)
			if (tt.status != 0 && status != tt.status) || a.Error == nil || a.Error.Code != tt.code || !strings.Contains(a.Error.Message, tt.want) || string(a.ID) != "7" {
				t.Fatalf("status %d (%s), %s %+v; want %d, error %d with %q under id 7", status, ctype, a.ID, a.Error, tt.status, tt.code, tt.want)
			}
			if strings.Contains(a.Error.Message, "Go ") || strings.Contains(a.Error.Message, "mcp.") {
				t.Fatalf("the message names Go types: %q", a.Error.Message)
			}
		})
	}
	status, _, _, a = postRPC(t, url, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"hi"}}}`, inSession)
	if status != http.StatusOK || !strings.Contains(string(a.Result), "a:hi") {
		t.Fatalf("a call after them: status %d, %+v", status, a)
	}
}

// TestHTTPInexactIDRefused: over HTTP, as on stdio, a call whose id the
// go-sdk would change (a fraction, past 2^53, a lone surrogate) is
// refused under its own id and not run; it ran and was answered under
// another (1.5 as 1), which a client cannot match. A surrogate pair is
// an id like any other.
func TestHTTPInexactIDRefused(t *testing.T) {
	_, url := modernGateway(t, HTTPOptions{})
	const legacy = "2025-11-25"
	_, _, sid, a := postRPC(t, url, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+legacy+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	if sid == "" || a.Result == nil {
		t.Fatalf("initialize: session %q, %+v", sid, a)
	}
	inSession := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": legacy}
	postRPC(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, inSession)
	modern := map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "a__echo"}
	for _, id := range []string{`1.5`, `9007199254740993`, `-9007199254740993`, `"\ud800"`, `"x\udc00"`} {
		for era, h := range map[string]map[string]string{"2025": inSession, "2026": modern} {
			meta := ""
			if era == "2026" {
				meta = "," + modernMeta
			}
			status, _, _, a := postRPC(t, url, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"hi"}`+meta+`}}`, h)
			if status != http.StatusBadRequest || a.Result != nil || a.Error == nil || a.Error.Code != -32600 || string(a.ID) != id {
				t.Errorf("id %s (%s): status %d, answered under id %s: result %s, error %+v; want 400, -32600 under the request's id", id, era, status, a.ID, a.Result, a.Error)
			}
		}
	}
	// The id a decoder reads is the last "id" member, its name escaped or
	// not; one that is not valid UTF-8 is answered under null.
	call := `,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"hi"}}}`
	for _, tt := range []struct{ body, id string }{
		{`{"jsonrpc":"2.0","id":"ok","\u0069d":"\ud800"` + call, `"\ud800"`},
		{`{"jsonrpc":"2.0","id":7,"\u0069d":7.5` + call, `7.5`},
		{"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\"" + call, `null`},
	} {
		status, _, data := postFull(t, url, tt.body, inSession)
		var a rpcAnswer
		json.Unmarshal([]byte(data), &a)
		if status != http.StatusBadRequest || !utf8.ValidString(data) || string(a.ID) != tt.id || a.Error == nil {
			t.Errorf("%q: status %d, answer %s; want 400 and an error under id %s", tt.body, status, data, tt.id)
		}
	}
	status, _, _, a := postRPC(t, url, `{"jsonrpc":"2.0","id":"\ud83d\ude00","method":"tools/call","params":{"name":"a__echo","arguments":{"text":"hi"}}}`, inSession)
	if status != http.StatusOK || !strings.Contains(string(a.Result), "a:hi") {
		t.Fatalf("a call with a surrogate pair id: status %d, %+v", status, a)
	}
}

// TestHTTPUnknownMethodOnUnknownSession: a call of an unknown method on a
// session that does not exist is still the SDK's 404, which tells a client
// to start a new session.
func TestHTTPUnknownMethodOnUnknownSession(t *testing.T) {
	_, url := modernGateway(t, HTTPOptions{})
	status, _, _, _ := postRPC(t, url, `{"jsonrpc":"2.0","id":7,"method":"foo/bar"}`, map[string]string{"Mcp-Session-Id": "NOPE", "MCP-Protocol-Version": "2025-11-25"})
	if status != http.StatusNotFound {
		t.Fatalf("status %d, want 404", status)
	}
}
