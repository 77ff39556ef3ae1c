//go:build linux

package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// auditRecord is as much of a `mcpbox logs --json` line as the checks read.
type auditRecord struct {
	Event   string `json:"event"`
	Session string `json:"session"`
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	Outcome string `json:"outcome"`
}

// logs reads the audit's records of one event through `mcpbox logs`.
func (g *gateway) logs(ctx context.Context, event string) ([]auditRecord, error) {
	out, err := g.mcpboxCmd(ctx, "logs", "--json", "--event", event)
	if err != nil {
		return nil, err
	}
	var recs []auditRecord
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var rec auditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("reading mcpbox logs --json: %w: %.200s", err, sc.Bytes())
		}
		recs = append(recs, rec)
	}
	return recs, sc.Err()
}

// checkAudit compares the call records of this run's sessions with the
// calls sent (one record each) and runs `mcpbox logs verify`.
func (r *runner) checkAudit(ctx context.Context, a *Audit) error {
	recs, err := r.g.logs(ctx, "call")
	if err != nil {
		return err
	}
	got := map[recordKey]int{}
	a.Outcomes = map[string]int{}
	r.mu.Lock()
	for _, rec := range recs {
		if !r.sessions[rec.Session] {
			continue
		}
		got[recordKey{rec.Session, rec.Server, rec.Tool}]++
		a.CallRecords++
		a.Outcomes[rec.Outcome]++
	}
	r.mu.Unlock()
	r.expected.mu.Lock()
	a.Expected, a.Missing, a.Extra = compareRecords(r.expected.n, got)
	r.expected.mu.Unlock()
	out, err := r.g.mcpboxCmd(ctx, "logs", "verify")
	a.Verified = err == nil
	if err != nil {
		a.Verify = err.Error()
	} else {
		a.Verify = strings.TrimSpace(string(out))
	}
	return nil
}

// compareRecords counts the calls expected, those without a record and
// the records beyond one per call, per (session, server, tool).
func compareRecords(want, got map[recordKey]int) (expected, missing, extra int) {
	for k, n := range want {
		expected += n
		missing += max(n-got[k], 0)
	}
	for k, n := range got {
		extra += max(n-want[k], 0)
	}
	return expected, missing, extra
}
