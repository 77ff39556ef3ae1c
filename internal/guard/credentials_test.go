package guard

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"mcpbox/internal/config"
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
