package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGatewayTestServer runs the same checks against testdata/mcpserver
// without mcpbox, so a failure above can be told from a broken test server.
func TestGatewayTestServer(t *testing.T) {
	bin := filepath.Join(goBuild(t, gwServerPkg), "mcpserver")
	for i, version := range gwVersions {
		t.Run(version, func(t *testing.T) {
			rec := newGWRecorder()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sess := gwDirect(t, ctx, bin, rec.options(), version)
			gwFeatures(t, sess, rec, gwTarget{servers: []string{"solo"}}, version, fmt.Sprintf("fresh%d", i))
		})
	}
	// The faults TestGatewayFaults survives are real: each one breaks a
	// plain client.
	for _, f := range []struct {
		tool string
		args map[string]any
	}{
		{"crash", nil},
		{"garbage", nil},
		{"huge", map[string]any{"mib": 50}},
	} {
		t.Run(f.tool, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sess := gwDirect(t, ctx, bin, nil, "")
			_, err := gwCall(ctx, sess, f.tool, f.args)
			if err == nil {
				_, err = gwCall(ctx, sess, "echo", map[string]any{"text": "x"})
			}
			if err == nil {
				t.Fatalf("%s did not break a plain client", f.tool)
			}
			if ctx.Err() != nil {
				t.Fatalf("%s hung a plain client", f.tool)
			}
			t.Logf("%s: %v", f.tool, err)
		})
	}
}

// gwFeatures checks, through sess, every feature of the servers in tg.
// fresh is the name of a tool to add at runtime, new to the servers.
func gwFeatures(t *testing.T, sess *mcp.ClientSession, rec *gwRecorder, tg gwTarget, version, fresh string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if got := sess.InitializeResult().ProtocolVersion; got != version {
		// A server may negotiate down; what follows must work either way.
		t.Logf("asked for protocol %s, negotiated %s", version, got)
	}
	first := tg.servers[0]

	names := gwToolNames(t, ctx, sess)
	for _, srv := range tg.servers {
		for _, tool := range []string{"whoami", "echo", "slow", "sample", "elicit", "add_tool", "crash"} {
			if !names[tg.name(srv, tool)] {
				t.Errorf("tools/list lacks %s: %v", tg.name(srv, tool), names)
			}
		}
	}
	if tg.prefixed && (names["echo"] || names["whoami"]) {
		t.Errorf("tools/list has unprefixed tools: %v", names)
	}

	t.Run("routing", func(t *testing.T) {
		for _, srv := range tg.servers {
			gwMustCall(t, sess, tg.name(srv, "whoami"), nil, srv)
			text := srv + " " + gwHex(4)
			gwMustCall(t, sess, tg.name(srv, "echo"), map[string]any{"text": text}, text)
		}
	})
	t.Run("prompts", func(t *testing.T) {
		res, err := sess.ListPrompts(ctx, &mcp.ListPromptsParams{})
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		got := map[string]bool{}
		for _, p := range res.Prompts {
			got[p.Name] = true
		}
		for _, srv := range tg.servers {
			name := tg.name(srv, "greet")
			if !got[name] {
				t.Fatalf("prompts/list: %v, lacks %s", got, name)
			}
			pr, err := sess.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: map[string]string{"who": version}})
			if err != nil {
				t.Fatalf("prompts/get %s: %v", name, err)
			}
			want := fmt.Sprintf("hello %s from %s", version, srv)
			if len(pr.Messages) != 1 {
				t.Fatalf("prompts/get %s: %d messages, want 1", name, len(pr.Messages))
			}
			if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != want {
				t.Errorf("prompts/get %s: %+v, want %q", name, pr.Messages[0].Content, want)
			}
		}
	})
	t.Run("resources", func(t *testing.T) {
		res, err := sess.ListResources(ctx, &mcp.ListResourcesParams{})
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		texts := map[string]bool{}
		for _, r := range res.Resources {
			rr, err := sess.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI})
			if err != nil {
				t.Fatalf("resources/read %s: %v", r.URI, err)
			}
			for _, c := range rr.Contents {
				texts[c.Text] = true
			}
		}
		for _, srv := range tg.servers {
			if !texts["server "+srv] {
				t.Errorf("resources %v read as %v, lack %q", res.Resources, texts, "server "+srv)
			}
		}
		if len(res.Resources) != len(tg.servers) {
			t.Errorf("%d resources, want %d: %v", len(res.Resources), len(tg.servers), res.Resources)
		}
	})
	t.Run("sampling and elicitation", func(t *testing.T) {
		type req struct{ tool, key, arg, want string }
		var reqs []req
		for _, srv := range tg.servers {
			p := "prompt for " + srv + " " + gwHex(4)
			reqs = append(reqs, req{tg.name(srv, "sample"), "prompt", p, "sampled: " + p})
			q := "question for " + srv + " " + gwHex(4)
			want, _ := json.Marshal(map[string]any{"action": "accept", "content": map[string]any{"answer": "answer to " + q}})
			reqs = append(reqs, req{tg.name(srv, "elicit"), "message", q, string(want)})
		}
		// All at once, so an answer routed to the wrong upstream shows.
		var wg sync.WaitGroup
		for _, r := range reqs {
			wg.Go(func() {
				got, err := gwCall(ctx, sess, r.tool, map[string]any{r.key: r.arg})
				if err != nil || got != r.want {
					t.Errorf("%s: %q, %v; want %q", r.tool, got, err, r.want)
				}
			})
		}
		wg.Wait()
	})
	t.Run("progress", func(t *testing.T) {
		srv := tg.servers[len(tg.servers)-1]
		token := "tok-" + gwHex(4)
		p := &mcp.CallToolParams{Name: tg.name(srv, "slow"), Arguments: map[string]any{"ms": 30, "steps": 3}}
		p.SetProgressToken(token)
		res, err := sess.CallTool(ctx, p)
		if err != nil || res.IsError || gwText(res) != "slept 3 steps" {
			t.Fatalf("%s: %+v, %v", p.Name, res, err)
		}
		var got []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			rec.mu.Lock()
			got = got[:0]
			for _, n := range rec.progress {
				if n.ProgressToken == token {
					got = append(got, fmt.Sprintf("%g/%g %s", n.Progress, n.Total, n.Message))
				}
			}
			rec.mu.Unlock()
			if len(got) >= 3 || time.Now().After(deadline) {
				break
			}
		}
		want := []string{"1/3 " + srv + " step 1", "2/3 " + srv + " step 2", "3/3 " + srv + " step 3"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("progress for %s: %q, want %q", token, got, want)
		}
	})
	t.Run("logging", func(t *testing.T) {
		if err := sess.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatalf("logging/setLevel: %v", err)
		}
		// On 2026-07-28 the level travels with each request instead.
		log := func(srv, level, text string) {
			p := &mcp.CallToolParams{Name: tg.name(srv, "log"), Arguments: map[string]any{"level": level, "text": text}}
			p.Meta = mcp.Meta{mcp.MetaKeyLogLevel: "info"}
			res, err := sess.CallTool(ctx, p)
			if err != nil || res.IsError {
				t.Fatalf("%s: %+v, %v", p.Name, res, err)
			}
		}
		want := map[string]bool{}
		for _, srv := range tg.servers {
			text := "log from " + srv + " " + gwHex(4)
			want[text] = true
			log(srv, "warning", text)
			log(srv, "debug", "below the level: "+text)
		}
		got := map[string]bool{}
		for deadline := time.Now().Add(5 * time.Second); len(got) < len(want) && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			rec.mu.Lock()
			for _, l := range rec.logs {
				if s, ok := l.Data.(string); ok && strings.Contains(s, " from ") {
					got[s] = true
				}
			}
			rec.mu.Unlock()
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("log messages %v, want %v", got, want)
		}
	})
	t.Run("list_changed", func(t *testing.T) {
		for len(rec.listChanged) > 0 {
			<-rec.listChanged
		}
		gwMustCall(t, sess, tg.name(first, "add_tool"), map[string]any{"name": fresh}, "added "+fresh)
		select {
		case <-rec.listChanged:
		case <-time.After(15 * time.Second):
			t.Fatal("no notifications/tools/list_changed within 15 s of adding a tool upstream")
		}
		names := gwToolNames(t, ctx, sess)
		if !names[tg.name(first, fresh)] {
			t.Fatalf("after adding %s to %s, tools/list is %v", fresh, first, names)
		}
		for _, srv := range tg.servers[1:] {
			if names[tg.name(srv, fresh)] {
				t.Errorf("tools/list has %s, added only to %s", tg.name(srv, fresh), first)
			}
		}
		gwMustCall(t, sess, tg.name(first, fresh), nil, fresh+" from "+first)
	})
}
