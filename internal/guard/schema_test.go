package guard

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/approval"
)

// TestSchemaMismatch: arguments are judged by the tool's inputSchema as
// the go-sdk's servers judge them (missing arguments are {}, defaults
// fill absent properties); what cannot be judged is "".
func TestSchemaMismatch(t *testing.T) {
	const obj = `{"inputSchema":{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer","default":1}},"required":["text"],"additionalProperties":false}}`
	for _, tc := range []struct {
		def, args string
		bad       bool
	}{
		{obj, `{"text":"x"}`, false},
		{obj, `{"text":"x","n":2}`, false},
		{obj, `{"text":"x","n":"2"}`, true},
		{obj, `{"text":"x","command":"ls"}`, true},
		{obj, `{}`, true},
		{obj, ``, true},
		{obj, `[1]`, true},
		{`{"inputSchema":{"type":"object","properties":{"n":{"type":"integer","default":1}},"minProperties":1}}`, `{}`, false}, // the default stands in
		{``, `{"anything":1}`, false},                        // no definition
		{`{"name":"t"}`, `{"anything":1}`, false},            // no schema
		{`{"inputSchema":"not a schema"}`, `{"a":1}`, false}, // unreadable
		{`{"inputSchema":{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","additionalProperties":false}}`, `{"a":1}`, false},
		{`{"inputSchema":{"type":"object","properties":{"p":{"type":"string","pattern":"(?<=a)b"}}}}`, `{"p":"zz"}`, false}, // not RE2
		{`{"inputSchema":{"type":"object","properties":{"p":{"$ref":"https://example.com/s.json"}}}}`, `{"p":1}`, false},    // remote ref
		{`{"inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"p":{"type":"string"}}}}`, `{"p":1}`, true},
	} {
		why := schemaMismatch(json.RawMessage(tc.def), json.RawMessage(tc.args))
		if (why != "") != tc.bad {
			t.Errorf("schemaMismatch(%s, %s) = %q, want a mismatch: %v", tc.def, tc.args, why, tc.bad)
		}
	}
	// A reason that quotes a huge value the agent sent is cut.
	huge := `{"p":"` + strings.Repeat("x", 1<<20) + `"}`
	why := schemaMismatch(json.RawMessage(`{"inputSchema":{"type":"object","properties":{"p":{"enum":["a"]}}}}`), json.RawMessage(huge))
	if why == "" || len(why) > maxSchemaWhy+100 {
		t.Errorf("reason of %d bytes for a 1 MiB value, want a mismatch of at most about %d", len(why), maxSchemaWhy)
	}
}

// TestGuardHeldCallCheckedBySchema: a call a rule holds for approval
// whose arguments its server's schema refuses is refused at once, with
// the schema's reason, and nobody is asked; one that matches waits for a
// person as before.
func TestGuardHeldCallCheckedBySchema(t *testing.T) {
	r := newGuardRig(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, args := range []string{`{"text":"review","n":"many"}`, `{"text":"review","command":"ls"}`} {
		res, err := r.sess.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("call %s: %v", args, err)
		}
		out := ""
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				out += tc.Text
			}
		}
		if !res.IsError || !strings.Contains(out, "do not match its input schema") || !strings.Contains(out, "nobody was asked") {
			t.Errorf("call %s: %q (isError %v), want refused by the schema", args, out, res.IsError)
		}
		if p, _ := r.g.Approvals(); len(p) != 0 {
			t.Fatalf("call %s was held for approval: %+v", args, p)
		}
	}
	go func() {
		id := r.waitingID(t)
		r.g.broker.Decide(id, approval.Decision{Allow: true, Scope: approval.ScopeOnce, By: "cli:uid=0"})
	}()
	if out, isErr := r.call(t, "review"); isErr || out != "review" {
		t.Fatalf("held call with valid arguments: %q %v", out, isErr)
	}
	recs := r.records(t)
	if len(recs) != 3 {
		t.Fatalf("%d call records, want 3: %+v", len(recs), recs)
	}
	for _, rec := range recs[:2] {
		if rec.Decision != "deny" || rec.Outcome != "denied" || rec.Rule != "arguments do not match the input schema" || rec.Approver != "" {
			t.Errorf("record %+v: want denied by the schema, no approver", rec)
		}
	}
	if recs[2].Decision != "approved" || recs[2].Approver != "cli:uid=0" {
		t.Errorf("record %+v: want approved by cli:uid=0", recs[2])
	}
}
