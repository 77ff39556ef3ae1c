package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestKubeStopCommand: `mcpbox stop` ends a pod server as it ends a local
// sandbox (the pod is deleted, the audit records the stop, the next call
// starts a new pod), and `mcpbox pause`, which a pod cannot do, says so
// and leaves it running.
func TestKubeStopCommand(t *testing.T) {
	e := kubeSetup(t, "")
	g := e.serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice := kubeSession(t, ctx, g, "alice-token-0123456789abcdef")
	first := gwMustCall(t, alice, "instance", nil, "")
	before := e.waitPods(t, 1, 30*time.Second)

	cli := func(args ...string) result {
		return mode{uid: -1}.mcpbox(t, 60*time.Second, "", append(args, "--config", e.config)...)
	}
	r := cli("ps", "--json")
	if r.code != 0 {
		t.Fatalf("mcpbox ps: %s", r)
	}
	var id string
	for _, row := range auDecode(t, r.stdout) {
		if row.str("pod") == before[0].Name && row.str("state") == "running" {
			id = row.str("id")
		}
	}
	if id == "" {
		t.Fatalf("mcpbox ps lists no running sandbox for pod %s:\n%s", before[0].Name, r.stdout)
	}
	// A pod's memory, pids and CPU are not measured: "-", not 0.
	for _, l := range strings.Split(cli("ps").stdout, "\n") {
		if strings.HasPrefix(l, id) && !regexp.MustCompile(`\s-\s+-\s+-\s+-\s`).MatchString(l) {
			t.Errorf("mcpbox ps shows the pod's MEMORY, PIDS, CPU and EXIT as measured: %q", l)
		}
	}
	if r := cli("pause", id); r.code == 0 || !strings.Contains(r.stderr, "cannot be paused") {
		t.Errorf("mcpbox pause of a pod %s: want a clear refusal, got %s", id, r)
	}
	if got := gwMustCall(t, alice, "instance", nil, ""); got != first {
		t.Errorf("after a refused pause the call ran in %q, want the same instance %q", got, first)
	}
	if r := cli("stop", id); r.code != 0 {
		t.Fatalf("mcpbox stop: %s", r)
	}
	e.waitPods(t, 0, 60*time.Second)
	// The record is committed by the audit's writer, maybe after the pod
	// is gone: read until it is there, within a bound.
	var stopped bool
	for end := time.Now().Add(15 * time.Second); !stopped && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, rec := range auDecode(t, cli("logs", "--json", "--event", "sandbox_stop").stdout) {
			stopped = stopped || rec.str("sandbox") == id
		}
	}
	if !stopped {
		t.Errorf("the audit has no sandbox_stop record of %s within 15 s", id)
	}
	if got := gwMustCall(t, alice, "instance", nil, ""); got == first {
		t.Errorf("the call after mcpbox stop ran in the stopped instance %q", got)
	}
	if after := e.waitPods(t, 1, 30*time.Second); after[0].Name == before[0].Name {
		t.Errorf("the pod %s was not replaced after mcpbox stop", after[0].Name)
	}
	// ps: the stopped sandbox's last call is its own, not the new pod's.
	var old, cur auRecord
	for _, row := range auDecode(t, cli("ps", "--json").stdout) {
		switch {
		case row.str("id") == id:
			old = row
		case row.str("state") == "running":
			cur = row
		}
	}
	if old == nil || cur == nil {
		t.Fatalf("mcpbox ps lists the stopped %s as %v and the running sandbox as %v", id, old, cur)
	}
	started, err := time.Parse(time.RFC3339Nano, cur.str("started"))
	if err != nil {
		t.Fatalf("the running sandbox's start %q: %v", cur.str("started"), err)
	}
	if lc, err := time.Parse(time.RFC3339Nano, old.str("last_call")); err == nil && !lc.Before(started) {
		t.Errorf("the stopped sandbox's last call %s is not before the new one started (%s)", lc, started)
	}
}
