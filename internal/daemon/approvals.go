package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"

	"mcpbox/internal/admin"
	"mcpbox/internal/guard"
)

// Approvals is `mcpbox approvals`: the pending requests and remembered
// decisions of c's serve instances (of one state dir, of several where
// instances of several configs run for the directory: admin.Listing, or
// of all); while none runs on c's one state dir,
// the decisions remembered for always, which the next serve would honour
// (guard.RememberedAt), so that they can be seen without starting it,
// with a note on stderr that says so (also when there are none). A
// state dir that does not exist is the error that no serve runs there.
func Approvals(c admin.Client, stderr io.Writer) (admin.Approvals, error) {
	r, err := c.Approvals()
	stateDir := c.StateDir
	if !errors.Is(err, admin.ErrNoInstance) || stateDir == admin.AllStateDirs || len(c.StateDirs) > 0 {
		return r, err
	}
	// With no serve, nothing waits: the answer is the decisions kept for
	// always, and success whether or not there are any (a script reads
	// the same exit status for "none pending" with or without a serve).
	if _, serr := os.Stat(stateDir); serr != nil {
		return r, err // no such state dir (a typo): not an answer
	}
	rem, oerr := guard.RememberedAt(stateDir)
	if oerr != nil {
		return r, errors.Join(err, oerr)
	}
	if len(rem) == 0 {
		fmt.Fprintf(stderr, "mcpbox: note: %v: nothing waits for approval, and no decision is kept for always\n", err)
	} else {
		fmt.Fprintf(stderr, "mcpbox: note: %v: these are the decisions it keeps for always, which the next serve honours (mcpbox approvals revoke ID forgets one)\n", err)
	}
	return admin.Approvals{Remembered: rem}, nil
}

// Revoke is `mcpbox approvals revoke ID`: through c's serve instances
// (as for Approvals), or, while none runs on c's one state dir, in its
// store (guard.RevokeAt), so that a decision remembered for always can
// be revoked before the next serve honours it.
func Revoke(c admin.Client, id string) error {
	err := c.Revoke(id)
	if !errors.Is(err, admin.ErrNoInstance) || c.StateDir == admin.AllStateDirs || len(c.StateDirs) > 0 {
		return err
	}
	return guard.RevokeAt(c.StateDir, id, fmt.Sprintf("cli:uid=%d", os.Getuid()))
}
