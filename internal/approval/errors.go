package approval

import "errors"

var (
	// ErrNoDB rejects Options without a database.
	ErrNoDB = errors.New("approval broker needs a database")

	// ErrUnknown is returned by Decide for an ID that names no request of
	// this broker's store, and by Revoke for an ID that names no
	// remembered decision.
	ErrUnknown = errors.New("no such approval")

	// ErrDecided is returned by Decide when the request was already
	// decided (by another channel, a timeout, a cancellation) or expired.
	ErrDecided = errors.New("approval already decided")

	// ErrElsewhere is returned by Decide for a request that waits at
	// another broker on the same database (another gateway on the state
	// dir, Options.Shared): only that one can release its call.
	ErrElsewhere = errors.New("approval held by another instance")

	// ErrCancelled is returned by Decide when the request's call was
	// cancelled (its client gave up or ended its session, the gateway
	// shut down): there is no call left to let run.
	ErrCancelled = errors.New("approval request cancelled")

	// ErrBadScope rejects a decision whose scope is not once, session or
	// always, or an allow of a trust request for longer than once (a
	// trust pins one definition; nothing is remembered).
	ErrBadScope = errors.New("approval scope does not apply")

	// ErrBadKind rejects a request whose kind is not call or trust.
	ErrBadKind = errors.New("approval kind is not call or trust")

	// ErrArgumentsTooLarge refuses to hold a request whose arguments are
	// larger than MaxArguments: the approver could not be shown them.
	ErrArgumentsTooLarge = errors.New("arguments too large to show an approver")

	// ErrNoDecider rejects a decision that does not say who made it: every
	// decision is audited with its author.
	ErrNoDecider = errors.New("approval decision does not say who decided")
)
