package credinject

import "testing"

// A Set made with another's Fakes holds the same placeholders and
// substitutes them; fakes of the wrong length are refused.
func TestFakesCarryOver(t *testing.T) {
	creds := []Credential{
		{Name: "T", Value: "ghp_0123456789abcdefghijABCDEFGHIJ012345", Hosts: []string{"api.example.com"}, Header: "Authorization"},
		{Name: "A", Hosts: []string{"s3.example.com"}, AWS: &AWS{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}},
	}
	a, err := New(Options{Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Credentials: creds, Fakes: a.Fakes()})
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := a.Placeholder("T")
	pb, _ := b.Placeholder("T")
	ka, sa, _, _ := a.AWSPlaceholder("A")
	kb, sb, _, _ := b.AWSPlaceholder("A")
	if pa != pb || ka != kb || sa != sb {
		t.Fatalf("placeholders differ: %q %q, %q %q, %q %q", pa, pb, ka, kb, sa, sb)
	}
	c, _ := New(Options{Credentials: creds})
	if pc, _ := c.Placeholder("T"); pc == pa {
		t.Fatal("a Set without Fakes reused a placeholder")
	}
	for _, f := range []Fakes{{Value: "short"}, {Value: creds[0].Value}} {
		if _, err := New(Options{Credentials: creds[:1], Fakes: map[string]Fakes{"T": f}}); err == nil {
			t.Errorf("fake %q accepted", f.Value)
		}
	}
	hs, err := ParseHosts([]string{"api.example.com", "*.svc.example.com:8443"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port int
		want bool
	}{{"api.example.com", 443, true}, {"api.example.com", 80, false}, {"a.svc.example.com", 8443, true}, {"svc.example.com", 8443, false}} {
		if got := hs.Match(tc.host, tc.port); got != tc.want {
			t.Errorf("Match(%s, %d) = %v", tc.host, tc.port, got)
		}
	}
}
