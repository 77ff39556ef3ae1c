package approval

import (
	"strings"
	"testing"
	"time"
)

// TestMessageNamesToolAsClientsDo: the question names the tool the way
// the client and its user know it (Request.Name, with the server's
// prefix), not in a spelling of the gateway's own.
func TestMessageNamesToolAsClientsDo(t *testing.T) {
	b, _ := newBroker(t, openDB(t), time.Second)
	req := Request{Kind: KindCall, Client: "c", Server: "github", Tool: "create_issue", Name: "github__create_issue"}
	msg := b.Message(req)
	if !strings.HasPrefix(msg, "Allow github__create_issue ") || strings.Contains(msg, "github.create_issue") {
		t.Errorf("message %q, want it to ask about github__create_issue", msg)
	}
	req.Kind = KindTrust
	if msg := b.Message(req); !strings.Contains(msg, "definition of github__create_issue") {
		t.Errorf("trust message %q, want it to name github__create_issue", msg)
	}
	req.Name = ""
	if msg := b.Message(req); !strings.Contains(msg, "github.create_issue") {
		t.Errorf("message without a name %q, want SERVER.TOOL", msg)
	}
}
