package guard

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/credinject"
	"mcpbox/internal/gateway"
)

func TestCredentialCheck(t *testing.T) {
	key := "AKIA" + "IOSFODNN7EXAMPLE"
	result := json.RawMessage(`{"content":[{"type":"text","text":"found ` + key + ` in config"}]}`)
	next := func(context.Context) (json.RawMessage, error) { return result, nil }
	tests := []struct {
		policy, want, notWant string
	}{
		{"", key, ""}, // flag: passed on, logged
		{config.CredentialsFlag, key, ""},
		{config.CredentialsRedact, "[REDACTED:credential:aws-access-key-id]", key},
		{config.CredentialsBlock, "was blocked", key},
	}
	for _, tt := range tests {
		t.Run("policy "+tt.policy, func(t *testing.T) {
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, nil))
			check := CredentialCheck(log, map[string]string{"s": tt.policy})
			out, err := check(context.Background(), &gateway.Call{Server: "s", Tool: "read"}, next)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), tt.want) || (tt.notWant != "" && strings.Contains(string(out), tt.notWant)) {
				t.Fatalf("result %s", out)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			if !strings.Contains(logs.String(), "aws-access-key-id") || strings.Contains(logs.String(), key) {
				t.Fatalf("log %q: want the rule, never the value", logs.String())
			}
		})
	}
}

// TestCredentialPlaceholdersAreOwn: the placeholder a sandbox holds for
// a secret added at the proxy (the same shape as the real value: here a
// Stripe key) is no credential finding in a result; a real key beside it
// still is.
func TestCredentialPlaceholdersAreOwn(t *testing.T) {
	real := "sk_live_" + "ABCDEF0123456789abcdef0123456789"
	set, err := credinject.New(credinject.Options{SandboxID: "sbx_t", Credentials: []credinject.Credential{
		{Name: "API_TOKEN", Value: real, Hosts: []string{"api.example.com"}, Header: "Authorization"}}})
	if err != nil {
		t.Fatal(err)
	}
	ph, _ := set.Placeholder("API_TOKEN")
	other := "sk_live_" + "ZYXWVU9876543210zyxwvu9876543210"
	log := slog.New(slog.DiscardHandler)
	call := &gateway.Call{Server: "s", Tool: "run_command"}
	for _, tc := range []struct {
		text  string
		rules int
	}{
		{"API_TOKEN=" + ph, 0},
		{"API_TOKEN=" + ph + " and " + other, 1},
	} {
		raw := json.RawMessage(`{"content":[{"type":"text","text":"` + tc.text + `"}]}`)
		out, rules, blocked := applyCredentials(log, config.CredentialsBlock, call, raw, set.Placeholders())
		if len(rules) != tc.rules || blocked != (tc.rules > 0) {
			t.Errorf("%q: rules %v, blocked %v, want %d rules", tc.text, rules, blocked, tc.rules)
		}
		if tc.rules == 0 && string(out) != string(raw) {
			t.Errorf("%q: result changed to %s", tc.text, out)
		}
	}
	if _, rules, _ := applyCredentials(log, config.CredentialsFlag, call, json.RawMessage(`"`+ph+`"`), nil); len(rules) == 0 {
		t.Fatalf("the placeholder %s is not credential-shaped: the test shows nothing", ph)
	}
}
