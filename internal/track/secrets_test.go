package track

import (
	"testing"
	"time"

	"mcpbox/internal/audit"
	"mcpbox/internal/egress"
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

// TestSecretRefusedDeniesDomain: a request refused for carrying a
// placeholder where it does not belong is named in the call's record,
// and the domain it went to, whose connection the proxy allowed, is
// joined as denied; another domain of the call stays allowed.
func TestSecretRefusedDeniesDomain(t *testing.T) {
	s := NewSandbox()
	c := s.Begin()
	now := time.Now()
	s.Opened(egress.Event{Time: now, Host: "evil.example.com", Port: 443, Decision: "allow"})
	s.Opened(egress.Event{Time: now, Host: "api.github.com", Port: 443, Decision: "allow"})
	s.SecretRefused("T", "evil.example.com", 443, now)
	s.SecretInjected("T", "api.github.com", 443, now)
	var rec audit.Record
	s.Finish(c, &rec)
	if got, want := rec.Detail[DetailSecretsRefused], "T@evil.example.com:443"; got != want {
		t.Errorf("detail %s = %q, want %q", DetailSecretsRefused, got, want)
	}
	if got, want := rec.Detail[DetailSecrets], "T@api.github.com:443"; got != want {
		t.Errorf("detail %s = %q, want %q", DetailSecrets, got, want)
	}
	decisions := map[string]string{}
	for _, d := range rec.Domains {
		decisions[d.Host] = d.Decision
	}
	if decisions["evil.example.com"] != "deny" || decisions["api.github.com"] != "allow" {
		t.Errorf("domains %+v: want evil.example.com denied, api.github.com allowed", rec.Domains)
	}
}
