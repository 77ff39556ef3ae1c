package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rootsServer is a server spoken to in the 2026 revision whose tool
// "roots" asks roots/list through an input_required result, and whose
// tool "mixed" asks roots/list and an elicitation in one round; both
// answer with the roots they got (and record them in seen).
func rootsServer(seen *[]string, mu *sync.Mutex) *mcp.Server {
	s := testServer("r")
	got := func(req *mcp.CallToolRequest) string {
		lr, _ := req.Params.InputResponses["r"].(*mcp.ListRootsResult)
		var uris []string
		if lr != nil {
			for _, r := range lr.Roots {
				uris = append(uris, r.URI)
			}
		}
		out := strings.Join(uris, ",")
		mu.Lock()
		*seen = append(*seen, out)
		mu.Unlock()
		return out
	}
	s.AddTool(&mcp.Tool{Name: "roots", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if _, ok := req.Params.InputResponses["r"]; ok {
			if req.Params.RequestState != "state-1" {
				return text("bad state " + req.Params.RequestState), nil
			}
			return text("roots: " + got(req)), nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"r": &mcp.ListRootsParams{}}, RequestState: "state-1"}, nil
	})
	s.AddTool(&mcp.Tool{Name: "mixed", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if _, ok := req.Params.InputResponses["r"]; ok {
			er, _ := req.Params.InputResponses["e"].(*mcp.ElicitResult)
			action := ""
			if er != nil {
				action = er.Action
			}
			return text("roots: " + got(req) + "; elicitation: " + action), nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
			"r": &mcp.ListRootsParams{},
			"e": &mcp.ElicitParams{Message: "ok?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
		}, RequestState: "state-m"}, nil
	})
	return s
}

// TestModernRootsAreTheSandboxes: a sandboxed server spoken to in the 2026
// revision that asks roots/list gets the sandbox's mounts, never the
// client's roots: a roots-only round is answered by the gateway (the
// client never sees it), and in a mixed round the client's roots answer
// is replaced on its way to the server.
func TestModernRootsAreTheSandboxes(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	launch := sdkLauncher(func(Scope) *mcp.Server { return rootsServer(&seen, &mu) }, nil, nil)
	r := &Server{Name: "r", Prefix: "r__", Allow: []string{"*"}, Launch: func(ctx context.Context, s Scope) (*Process, error) {
		p, err := launch(ctx, s)
		if p != nil {
			p.Roots = []Root{{URI: "file:///workspace/input", Name: "input"}}
		}
		return p, err
	}}
	gw := newGateway(t, r)
	url := serveHTTP(t, gw, HTTPOptions{})
	const hostRoot = "file:///home/alice/secret-project"

	// Roots only: the gateway answers, the client gets the result.
	res, rerr := modernCall(t, url, "", "r__roots", `{}`, "")
	if rerr != nil {
		t.Fatalf("roots: error %v", rerr)
	}
	if res["resultType"] == "input_required" {
		t.Fatalf("a roots-only round reached the client: %v", res)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), "roots: file:///workspace/input") {
		t.Fatalf("roots: %s, want the sandbox's mounts", b)
	}

	// Mixed: the client sees both questions and answers both; the server
	// gets its elicitation answer and the sandbox's roots.
	res, rerr = modernCall(t, url, "", "r__mixed", `{}`, "")
	if rerr != nil || res["resultType"] != "input_required" {
		t.Fatalf("mixed: result %v error %v, want input_required", res, rerr)
	}
	reqs, _ := res["inputRequests"].(map[string]any)
	if len(reqs) != 2 {
		t.Fatalf("mixed: inputRequests %v, want r and e", reqs)
	}
	state, _ := res["requestState"].(string)
	answers := `,"inputResponses":{"r":{"roots":[{"uri":"` + hostRoot + `","name":"home"}]},"e":{"action":"accept","content":{}}},"requestState":` + jsonString(state)
	res, rerr = modernCall(t, url, "", "r__mixed", `{}`, answers)
	if rerr != nil {
		t.Fatalf("mixed retry: error %v", rerr)
	}
	b, _ = json.Marshal(res)
	if !strings.Contains(string(b), "roots: file:///workspace/input; elicitation: accept") {
		t.Fatalf("mixed retry: %s, want the sandbox's roots and the client's elicitation answer", b)
	}

	// A client that sends roots on its own, unasked, is replaced too.
	res, _ = modernCall(t, url, "", "r__roots", `{}`, `,"inputResponses":{"r":{"roots":[{"uri":"`+hostRoot+`"}]}},"requestState":"state-1"`)
	b, _ = json.Marshal(res)
	if !strings.Contains(string(b), "roots: file:///workspace/input") {
		t.Fatalf("unasked roots: %s, want the sandbox's mounts", b)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("the server answered %d rounds with roots (%q), want 3", len(seen), seen)
	}
	for _, s := range seen {
		if strings.Contains(s, "/home/alice") || s != "file:///workspace/input" {
			t.Fatalf("the server saw roots %q, want only the sandbox's mounts", seen)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
