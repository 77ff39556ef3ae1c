package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// Samples are assembled from parts so that no complete credential-shaped
// string sits in the repository.
func sample(parts ...string) string { return strings.Join(parts, "") }

func TestDetectRules(t *testing.T) {
	alnum := strings.Repeat("aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5", 3)
	key := sample("-----BEGIN ", "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7", alnum[:40], "\n-----END RSA ", "PRIVATE KEY-----")
	tests := []struct {
		rule, text string
		greedy     bool // may also take following text (a key without END)
	}{
		{"private-key", key, false},
		{"private-key", sample("-----BEGIN ", "OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAA", alnum[:40]), true}, // truncated, JSON-escaped
		{"aws-access-key-id", sample("AKIA", "IOSFODNN7EXAMPLE"), false},
		{"github-token", sample("ghp_", alnum[:36]), false},
		{"github-fine-grained-pat", sample("github_pat_", alnum[:82]), false},
		{"gitlab-token", sample("glpat-", alnum[:20]), false},
		{"slack-token", sample("xoxb-", "1234567890-", alnum[:24]), false},
		{"slack-webhook", sample("https://hooks.slack.com/services/", "T0000000/B0000000/", alnum[:26]), false},
		{"stripe-key", sample("sk_live_", alnum[:24]), false},
		{"google-api-key", sample("AIza", alnum[:35]), false},
		{"openai-key", sample("sk-proj-", alnum[:20], "T3BlbkFJ", alnum[20:40]), false},
		{"anthropic-key", sample("sk-ant-api03-", alnum[:90]), false},
		{"npm-token", sample("npm_", alnum[:36]), false},
		{"jwt", sample("eyJhbGciOiJIUzI1NiJ9", ".eyJzdWIiOiIxMjM0NTY3ODkwIn0", ".", alnum[:30]), false},
		{"azure-storage-key", sample("AccountKey=", alnum[:86], "=="), false},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			text := "before " + tt.text + " after"
			f := Detect([]byte(text))
			if !Shaped(text) {
				t.Errorf("Shaped(%q) = false, Detect finds %+v", text, f)
			}
			if len(f) != 1 || f[0].Rule != tt.rule || f[0].Start != len("before ") || !strings.HasPrefix(text[f[0].Start:f[0].End], tt.text) {
				t.Fatalf("Detect = %+v, want one %s over the sample", f, tt.rule)
			}
			if tt.greedy {
				return
			}
			if got, want := string(Mask([]byte(text), f)), "before [REDACTED:credential:"+tt.rule+"] after"; got != want {
				t.Fatalf("Mask = %q", got)
			}
			// Inside a JSON string, as a tool result carries it.
			raw, _ := json.Marshal(map[string]string{"text": text})
			masked := Mask(raw, Detect(raw))
			var back map[string]string
			if err := json.Unmarshal(masked, &back); err != nil || strings.Contains(string(masked), tt.text[len(tt.text)-8:]) {
				t.Fatalf("JSON: %s (%v)", masked, err)
			}
		})
	}
}

func TestDetectLeavesOrdinaryText(t *testing.T) {
	for _, text := range []string{
		"the sky is blue and AKIA is a prefix",
		"sk_live_short",
		"ghp_tooShort",
		"see https://github.com/org/repo/blob/main/README.md",
		"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
	} {
		if f := Detect([]byte(text)); len(f) != 0 || Shaped(text) {
			t.Errorf("%q: findings %+v, Shaped %v", text, f, Shaped(text))
		}
	}
}
