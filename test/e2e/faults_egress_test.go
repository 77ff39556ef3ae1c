package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEgressFlood: a sandbox floods its egress proxy with connections,
// more than its connection limit, each holding a request head half sent
// (slowloris). Another sandbox's requests through its own proxy, and the
// gateway's answers, must stay prompt meanwhile; the flooding sandbox's
// half-sent requests are cut at the proxy's header timeout.
func TestEgressFlood(t *testing.T) {
	m := modes(t)[0]
	target := httpServer(t, "127.0.0.2")
	_, portStr, _ := net.SplitHostPort(target)
	port, _ := strconv.Atoi(portStr)
	bin := goBuild(t, gwServerPkg)
	server := func(name string) map[string]any {
		return map[string]any{
			"command": []string{"/opt/bin/mcpserver", "-name", name},
			"filesystem": map[string]any{
				"mounts": []map[string]string{{"source": bin, "target": "/opt/bin", "mode": "ro"}},
				"output": map[string]any{},
			},
			"network": map[string]any{"egress": []map[string]any{{"host": "127.0.0.2", "ports": []int{port}}}},
			"tools": map[string]any{"allow": []string{"*"},
				// fetch_write is open-world: it would wait for an approval.
				"rules": []map[string]any{{"tool": "fetch_write", "action": "allow"}}},
		}
	}
	cfg := hsWriteConfig(t, m, gwDir(t, m), map[string]any{"flooder": server("flooder"), "victim": server("victim")})
	g := gwServe(t, m, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess := gwConnect(t, ctx, g.url, nil, nil, gwLegacy)
	fetch := func(srv string, i int) (time.Duration, error) {
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		start := time.Now()
		got, err := gwCall(cctx, sess, srv+"__fetch_write", map[string]any{"url": "http://" + target + "/", "path": fmt.Sprintf("f%d", i)})
		if err == nil && got != strconv.Itoa(len("hello from "+target)) {
			err = fmt.Errorf("fetched %s bytes", got)
		}
		return time.Since(start), err
	}
	if _, err := fetch("victim", 0); err != nil {
		t.Fatalf("victim's fetch before the flood: %v", err)
	}
	if _, err := fetch("flooder", 0); err != nil {
		t.Fatalf("flooder's fetch before the flood: %v", err)
	}

	// 1,500 connections, past the default limit of 1,024, held 12 s: past
	// the proxy's 10 s header timeout.
	const conns, hold = 1500, 12 * time.Second
	floodStart := time.Now()
	got := gwMustCall(t, sess, "flooder__egress_flood", map[string]any{"conns": conns, "hold_ms": hold.Milliseconds()}, "")
	t.Logf("flooder: %s in %v", got, time.Since(floodStart).Round(time.Millisecond))
	if !strings.HasPrefix(got, "opened ") {
		t.Fatalf("egress_flood: %q", got)
	}

	var lat []time.Duration
	var mu sync.Mutex
	var errs []string
	for i := 1; time.Since(floodStart) < 8*time.Second; i++ {
		d, err := fetch("victim", i)
		start := time.Now()
		_, gerr := gwCall(ctx, sess, "victim__whoami", nil)
		gd := time.Since(start)
		mu.Lock()
		lat = append(lat, d)
		if err != nil {
			errs = append(errs, fmt.Sprintf("fetch %d: %v", i, err))
		}
		if gerr != nil || gd > 2*time.Second {
			errs = append(errs, fmt.Sprintf("whoami %d after %v: %v", i, gd, gerr))
		}
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
	if len(errs) > 0 {
		t.Errorf("during the flood: %v", errs)
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		t.Fatal("no fetch by the victim during the flood")
	}
	worst := lat[len(lat)-1]
	t.Logf("victim's fetches during the flood: %d, p50 %v, max %v", len(lat), lat[len(lat)/2], worst)
	if worst > 2*time.Second {
		t.Errorf("a fetch by the victim took %v during the flood, want < 2 s", worst)
	}
	// The proxy's header timeout frees the flooder's slots: within a few
	// seconds of it, the flooder's own fetches work again.
	for deadline := floodStart.Add(hold + 15*time.Second); ; time.Sleep(250 * time.Millisecond) {
		_, err := fetch("flooder", 1)
		if err == nil {
			t.Logf("the flooder fetches again %v after the flood began", time.Since(floodStart).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flooder's own fetches still fail %v after the flood began: %v", time.Since(floodStart), err)
		}
	}
	logs := g.logs.String()
	if !strings.Contains(logs, "connection limit (1024) reached") {
		t.Errorf("the gateway's log does not report the flooder's connection limit")
	}
}
