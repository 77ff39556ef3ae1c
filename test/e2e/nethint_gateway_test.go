package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestServerTriedNetworkNoted: a long-running server whose call fails
// for want of a network (its sandbox has no egress) leaves a trace of
// why: the call's audit record says what the sandbox tried since its last
// failed call (a DNS query, a packet with no route) and serve's log warns
// with the fix. A call that succeeds gets no such note. The sandbox's
// init tells only of a command that exits; a server runs on.
func TestServerTriedNetworkNoted(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		bin := goBuild(t, gwServerPkg)
		cfg := hsWriteConfig(t, m, gwDir(t, m), map[string]any{"s": map[string]any{
			"command": []string{"/opt/bin/mcpserver", "-name", "s"},
			"filesystem": map[string]any{
				"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}},
			},
			"tools": map[string]any{"allow": []string{"*"}},
		}})
		g := gwServe(t, m, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
		gwMustCall(t, sess, "echo", map[string]any{"text": "quiet"}, "quiet")
		for _, u := range []string{"http://nethint-e2e.invalid/", "http://192.0.2.1/"} {
			if _, err := gwCall(ctx, sess, "http_get", map[string]any{"url": u}); err == nil {
				t.Fatalf("http_get %s succeeded in a sandbox without a network", u)
			}
		}
		r := m.mcpbox(t, 60*time.Second, "", "logs", "--json", "--event", "call", "--config", cfg)
		if r.code != 0 {
			t.Fatalf("mcpbox logs:\n%s", r)
		}
		recs := auDecode(t, r.stdout)
		if len(recs) != 3 {
			t.Fatalf("%d call records, want 3:\n%s", len(recs), r.stdout)
		}
		network := func(rec auRecord) string {
			d, _ := rec["detail"].(map[string]any)
			s, _ := d["network"].(string)
			return s
		}
		if n := network(recs[0]); n != "" {
			t.Errorf("echo's record says %q, want no network note", n)
		}
		for i, want := range []string{"DNS quer", "with no route"} {
			if n := network(recs[i+1]); !strings.Contains(n, want) || !strings.Contains(n, "but has none") {
				t.Errorf("http_get record %d: network %q, want it to name %q", i, n, want)
			}
		}
		deadline := time.Now().Add(15 * time.Second)
		for !strings.Contains(g.logs.String(), "a failed call's sandbox tried the network") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if logs := g.logs.String(); !strings.Contains(logs, "a failed call's sandbox tried the network") || !strings.Contains(logs, "network.egress") {
			t.Errorf("serve's log does not say the call tried the network:\n%s", logs)
		}
	})
}
