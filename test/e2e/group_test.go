package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestGroupPlacement: the servers of a group share one sandbox (they see
// each other's processes) while a server outside it sees neither; each
// member gets only its own env secrets, and no value reaches the client.
func TestGroupPlacement(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		bin := goBuild(t, "mcpbox/test/e2e/testdata/hostile")
		secret := hsSecret(t)
		a := hsServer(bin, "a", map[string]any{"TOKEN_A": map[string]any{"from": "env:GROUP_TOKEN_A"}})
		a["placement"] = "group:dev"
		b := hsServer(bin, "b", nil)
		b["placement"] = "group:dev"
		delete(b, "filesystem") // the group's sandbox is a's
		c := hsServer(bin, "c", nil)
		cfg := hsWriteConfig(t, m, dir, map[string]any{"a": a, "b": b, "c": c})
		g := gwServe(t, m, cfg, "GROUP_TOKEN_A="+secret)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
		peek := func(server string) string {
			t.Helper()
			out, err := gwCall(ctx, sess, server+"__peek", nil)
			if err != nil {
				t.Fatalf("%s__peek: %v", server, err)
			}
			if strings.Contains(out, secret) {
				t.Fatalf("%s__peek returned the secret value", server)
			}
			return out
		}
		pa, pb, pc := peek("a"), peek("b"), peek("c")
		env := func(p string) string { e, _, _ := strings.Cut(p, "secrets dir"); return e }
		if !strings.Contains(env(pa), "TOKEN_A=[REDACTED:TOKEN_A]") {
			t.Errorf("member a lacks its secret:\n%s", env(pa))
		}
		if strings.Contains(env(pb), "TOKEN_A") {
			t.Errorf("member b got a's secret in its environment:\n%s", env(pb))
		}
		// One sandbox: b sees a's process (and, since a group is one trust
		// domain, its environment, redacted on the way out).
		_, procsB, _ := strings.Cut(pb, "processes:")
		if !strings.Contains(procsB, "[REDACTED:TOKEN_A]") {
			t.Errorf("member b does not see member a's process: not one sandbox?\n%s", procsB)
		}
		_, procsC, _ := strings.Cut(pc, "processes:")
		if strings.Contains(procsC, "TOKEN_A") || strings.Contains(procsC, "-name\x00a") {
			t.Errorf("server c, outside the group, sees into it:\n%s", procsC)
		}
		g.stop(t)
	})
}
