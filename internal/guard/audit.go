package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"mcpbox/internal/audit"
)

// auditFailing returns the refusal of a call that must not start because
// the audit store cannot write (audit.on_failure: refuse), or ok false.
func (g *Guard) auditFailing(tool string, rec *audit.Record) (json.RawMessage, bool) {
	err := g.store.Err()
	if err == nil || g.allowUnaudited {
		return nil, false
	}
	rec.Decision, rec.Outcome, rec.Rule = "deny", audit.OutcomeAuditFailing, "audit.on_failure: refuse"
	res, _ := refusal(fmt.Sprintf("mcpbox: %s was not run: the audit log cannot be written (%s); calls are refused until it can",
		tool, audit.Problem(err)), nil)
	return res, true
}

// commit commits rec and passes the call's outcome on only once rec is
// durable; otherwise the client gets a refusal instead of the result
// (audit.on_failure: refuse), or the result, unaudited, with an error in
// the log (allow). rec is still queued and committed late if the store
// recovers.
func (g *Guard) commit(ctx context.Context, rec audit.Record, res json.RawMessage, err error) (json.RawMessage, error) {
	ticket := g.store.Submit(rec)
	werr := ticket.Wait(ctx)
	if werr != nil && ctx.Err() != nil {
		// The call was cancelled (Ctrl-C on serve, its client gone): the
		// record is queued all the same, and committed in a moment by a
		// healthy store. Wait that moment, so that the outcome (often the
		// cancellation's own error) is passed on rather than a refusal
		// blaming the audit log.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelledCommitWait)
		werr = ticket.Wait(wctx)
		cancel()
	}
	if werr == nil || rec.Outcome == audit.OutcomeAuditFailing { // not run: already refused
		return res, err
	}
	if g.allowUnaudited {
		n := g.unaudited.Add(1)
		g.log.Error("audit record not committed; the call's result is passed on unaudited (audit.on_failure: allow)",
			"server", rec.Server, "tool", cmpOr(rec.Name, rec.Tool), "client", rec.Client, "unaudited_calls", n, "err", werr)
		return res, err
	}
	if !errors.Is(werr, context.Canceled) && !errors.Is(werr, context.DeadlineExceeded) {
		g.log.Error("audit record not committed; the call's result is withheld",
			"server", rec.Server, "tool", cmpOr(rec.Name, rec.Tool), "client", rec.Client, "err", werr)
	}
	if ctx.Err() != nil && (errors.Is(werr, context.Canceled) || errors.Is(werr, context.DeadlineExceeded)) {
		return refusal(fmt.Sprintf("mcpbox: the result of %s is withheld: the call was cancelled (%v) before its audit record was committed",
			cmpOr(rec.Name, rec.Tool), context.Cause(ctx)), nil)
	}
	return refusal(fmt.Sprintf("mcpbox: the result of %s is withheld: its audit record could not be written (%s)",
		cmpOr(rec.Name, rec.Tool), audit.Problem(werr)), nil)
}

// cancelledCommitWait bounds how long a cancelled call's outcome waits
// for its record: a healthy store commits within milliseconds.
const cancelledCommitWait = 2 * time.Second
