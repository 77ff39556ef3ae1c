package track

import (
	"testing"
	"time"

	"mcpbox/internal/audit"
)

// TestSecretsInjectedJoinCall: a call's record names the secrets the
// proxy added while it ran, once each, and none from before it began.
func TestSecretsInjectedJoinCall(t *testing.T) {
	s := NewSandbox()
	s.SecretInjected("OLD", "api.example.com", 443, time.Now().Add(-time.Minute))
	c := s.Begin()
	s.SecretInjected("T", "api.github.com", 443, time.Now())
	s.SecretInjected("T", "api.github.com", 443, time.Now())
	s.SecretInjected("A", "127.0.0.1", 8443, time.Now())
	var rec audit.Record
	s.Finish(c, &rec)
	if got, want := rec.Detail[DetailSecrets], "A@127.0.0.1:8443,T@api.github.com:443"; got != want {
		t.Fatalf("detail %s = %q, want %q", DetailSecrets, got, want)
	}
	var none audit.Record
	s.Finish(s.Begin(), &none)
	if none.Detail != nil {
		t.Fatalf("a call with no injection has detail %v", none.Detail)
	}
}
