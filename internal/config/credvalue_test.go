package config

import "testing"

// TestCredentialValue: values that carry a credential by their shape
// are flagged whatever their variable is called; ordinary values are not.
func TestCredentialValue(t *testing.T) {
	for v, want := range map[string]bool{
		`{"Authorization": "Bearer ntn_1234567890abcdefghijklmnopqrstuvwxyzABCDEFGH", "Notion-Version": "2022-06-28"}`: true,
		"Bearer ghp_0123456789abcdefghijklmnopqrstuvwxyzAB":                                                            true,
		"hf_abcdefghijklmnopqrstuvwxyzABCDEFGH":                                                                        true,
		"secret_abcdefghijklmnopqrstuvwxyz0123456789ABCDEF":                                                            true,
		"sk-abcdefghijklmnopqrstuvwxyz012345":                                                                          true,
		"https://0123456789abcdef0123456789abcdef@o123.ingest.sentry.io/456":                                           true,
		"postgres://app:Hunter2Hunter2@db.internal/app":                                                                true,
		"Server=db;Database=app;User Id=sa;Password=Hunter2Hunter2;":                                                   true,
		"ssh://git@github.com/org/repo.git":                                                                            false,
		"https://api.example.com/v1":                                                                                   false,
		"info":                                                                                                         false,
		"/home/alice/data":                                                                                             false,
		"2022-06-28":                                                                                                   false,
		"token counting is on":                                                                                         false,
		"--password-file=/run/secrets/pw":                                                                              false,
	} {
		if got := CredentialValue(v); got != want {
			t.Errorf("CredentialValue(%q) = %v, want %v", v, got, want)
		}
	}
}
