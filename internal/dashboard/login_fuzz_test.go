package dashboard

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzRedeem: no string but the one token minted with the secret logs
// in, only once, and redeeming never panics. The token and the clock are
// fixed, so that every fuzzing process agrees on the one valid token.
func FuzzRedeem(f *testing.F) {
	const secret = "mcpbox_fuzzsecret0123456789"
	now := time.Unix(1_800_000_000, 0)
	valid := mint(secret, []byte("0123456789abcdef"), now.Add(time.Minute))
	f.Add(valid)
	f.Add("")
	f.Add(".")
	f.Add(strings.Repeat("A", 32) + "." + strings.Repeat("B", 43))
	f.Add(valid + "x")
	f.Add(valid[:len(valid)-1] + "x")
	f.Add(strings.Replace(valid, ".", "..", 1))
	f.Add(mint(secret, []byte("0123456789abcdef"), now.Add(time.Hour))) // too far ahead
	f.Add(mint(secret, []byte("0123456789abcdef"), now))                // expired
	f.Fuzz(func(t *testing.T, tok string) {
		h := &Handler{opts: Options{LoginSecret: func() string { return secret }, Now: func() time.Time { return now }}, used: map[string]time.Time{}}
		// A refusing admit is asked of the valid token only, and burns
		// nothing.
		asked := false
		if got, err := h.redeem(tok, func() error { asked = true; return errors.New("refused") }); got || (err != nil) != (tok == valid) || asked != (tok == valid) {
			t.Fatalf("redeem(%q) with a refusing admit = %v, %v (asked: %v)", tok, got, err, asked)
		}
		got, _ := h.redeem(tok, nil)
		if got != (tok == valid) {
			t.Fatalf("redeem(%q) = %v", tok, got)
		}
		if again, _ := h.redeem(tok, nil); got && again {
			t.Fatalf("redeemed %q twice", tok)
		}
	})
}
