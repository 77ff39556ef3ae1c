package gateway

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// TestToolSchemasMadeValidForClients: tool schemas without "type" (as
// npm server-gitlab@2025.4.25 lists them) reach the client with "type":
// "object", warned about once per server; a tool whose schema cannot be
// made valid without guessing is left out, warned about once; valid
// tools pass byte for byte in meaning; and the List hook (the pins) sees
// what the server sent, unchanged.
func TestToolSchemasMadeValidForClients(t *testing.T) {
	listed := `{"tools":[` +
		`{"name":"untyped","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#"}},` +
		`{"name":"props","description":"d","inputSchema":{"properties":{"a":{"type":"string"}},"required":["a"]},"outputSchema":{"properties":{"r":{}}}},` +
		`{"name":"noschema"},` +
		`{"name":"ok","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}},` +
		`{"name":"stringtype","inputSchema":{"type":"string"}},` +
		`{"name":"notobject","inputSchema":[1]},` +
		`{"name":"boolprop","inputSchema":{"type":"object","properties":{"a":true}}},` +
		`{"name":"badout","inputSchema":{"type":"object"},"outputSchema":{"type":"array"}}` +
		`]}`
	launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/list" {
			s.reply(msg, listed)
		}
	})
	var logs bytes.Buffer
	var logMu sync.Mutex
	var hookMu sync.Mutex
	var hooked []Item
	gw, err := New([]*Server{{Name: "gl", Launch: launch, Allow: []string{"*"}, Restart: RestartNo}}, Options{
		Version: "test",
		Logger:  slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil)),
		Hooks: Hooks{List: func(_, _, kind string, _ uint64, items []Item) []Item {
			if kind == KindTools {
				hookMu.Lock()
				hooked = append([]Item(nil), items...)
				hookMu.Unlock()
			}
			return items
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	c := newRawClient(t, gw)
	_, raw := c.call("tools/list", nil)
	wantJSON(t, raw, "result", `{"tools":[`+
		`{"name":"untyped","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}},`+
		`{"name":"props","description":"d","inputSchema":{"properties":{"a":{"type":"string"}},"required":["a"],"type":"object"},"outputSchema":{"properties":{"r":{}},"type":"object"}},`+
		`{"name":"noschema","inputSchema":{"type":"object"}},`+
		`{"name":"ok","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`+
		`]}`)
	c.call("tools/list", nil) // a second list warns no more

	// The hook saw the server's entries as sent: a pin's hash is of them.
	var sent struct{ Tools []json.RawMessage }
	if err := json.Unmarshal([]byte(listed), &sent); err != nil {
		t.Fatal(err)
	}
	hookMu.Lock()
	if len(hooked) != len(sent.Tools) {
		t.Fatalf("the List hook saw %d tools, want the %d sent", len(hooked), len(sent.Tools))
	}
	for i, it := range hooked {
		if !bytes.Equal(it.Raw, sent.Tools[i]) {
			t.Errorf("the List hook saw %s, want what the server sent: %s", it.Raw, sent.Tools[i])
		}
	}
	hookMu.Unlock()

	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if n := strings.Count(out, `given one in the list clients get`); n != 1 {
		t.Errorf("%d warnings of normalised schemas for one server over two lists, want 1:\n%s", n, out)
	}
	for _, tool := range []string{"stringtype", "notobject", "boolprop", "badout"} {
		if n := strings.Count(out, "tool="+tool+" "); n != 1 {
			t.Errorf("%d warnings for the left-out tool %s over two lists, want 1:\n%s", n, tool, out)
		}
	}
}

// lockedWriter serializes writes to a buffer read by the test.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
