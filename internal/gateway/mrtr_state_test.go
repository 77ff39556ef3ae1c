package gateway

import (
	"strings"
	"testing"
	"time"
)

// TestRequestStateOneSpelling: a requestState verifies only as issued.
// encoding/base64 (even strict) skips \r and \n, and without Strict it
// ignores the stray bits of the last character, so other spellings of a
// state verified as the state itself. Replays are stopped by the parked
// call's round, not by the text, so this is hygiene: a state is compared
// (logged, cached) as text safely.
func TestRequestStateOneSpelling(t *testing.T) {
	k := newMRTRKeys()
	now := time.Now()
	st := k.sign(stateClaims{Call: "c1", Round: 1, Agent: "a", Bind: "b", Expires: now.Add(time.Minute).Unix()})
	if _, err := k.verify(st, now); err != nil {
		t.Fatalf("the state as issued: %v", err)
	}
	var bad []string
	for i := len(mrtrPrefix); i <= len(st); i++ {
		for _, c := range []string{"\n", "\r", "\r\n"} {
			bad = append(bad, st[:i]+c+st[i:])
		}
	}
	// The last character of each part with its unused low bits set.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for _, end := range []int{len(mrtrPrefix) + strings.IndexByte(st[len(mrtrPrefix):], '.'), len(st)} {
		last := strings.IndexByte(alphabet, st[end-1])
		for d := 1; d < 4; d++ {
			if last|d < len(alphabet) && last|d != last {
				bad = append(bad, st[:end-1]+string(alphabet[last|d])+st[end:])
			}
		}
	}
	for _, b := range bad {
		if _, err := k.verify(b, now); err == nil {
			t.Errorf("verify accepted %q (issued %q)", b, st)
		}
	}
}

// TestRequestStateForeign: a state naming another gateway's keys (an
// mcpbox upstream) is foreign; this gateway's, tampered with or not, and
// one that cannot be read are not: those it verifies, and refuses.
func TestRequestStateForeign(t *testing.T) {
	k, other := newMRTRKeys(), newMRTRKeys()
	c := stateClaims{Call: "c1", Round: 1, Agent: "a", Bind: "b", Expires: time.Now().Add(time.Minute).Unix()}
	own, theirs := k.sign(c), other.sign(c)
	for _, tt := range []struct {
		state   string
		foreign bool
	}{
		{own, false},
		{own[:len(own)-2] + "xx", false}, // its signature tampered with
		{theirs, true},
		{mrtrPrefix + "not base64!.x", false},
		{mrtrPrefix, false},
	} {
		if got := k.foreign(tt.state); got != tt.foreign {
			t.Errorf("foreign(%q) = %v, want %v", tt.state, got, tt.foreign)
		}
	}
}
