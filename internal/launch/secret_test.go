package launch

import (
	"context"
	"strings"
	"testing"
)

// TestSecretFlag: the --secret syntax, and errors that name the flag's
// NAME but never a value.
func TestSecretFlag(t *testing.T) {
	t.Setenv("MCPBOX_TEST_SECRET_FLAG", "s3cret-value-123")
	sec, err := SecretFlag(context.Background(), "TOKEN=env:MCPBOX_TEST_SECRET_FLAG,as=file")
	if err != nil || sec.Name != "TOKEN" || string(sec.Value) != "s3cret-value-123" || !sec.AsFile {
		t.Fatalf("as=file: %+v, %v", sec, err)
	}
	if sec, err := SecretFlag(context.Background(), "TOKEN=env:MCPBOX_TEST_SECRET_FLAG"); err != nil || sec.AsFile {
		t.Fatalf("default as=env: %+v, %v", sec, err)
	}
	for _, tt := range []struct{ flag, want string }{
		{"TOKEN", "want NAME=REF"},
		{"=env:X", "want NAME=REF"},
		{"TOKEN=env:MCPBOX_TEST_SECRET_FLAG,as=disk", "as=disk: want env or file"},
		{"TOKEN=env:MCPBOX_TEST_NO_SUCH_VAR", "--secret TOKEN:"},
		{"TOKEN=s3cret-value-123", "--secret TOKEN:"},
	} {
		_, err := SecretFlag(context.Background(), tt.flag)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want it to contain %q", tt.flag, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret-value-123") {
			t.Errorf("%q: the error shows a value: %v", tt.flag, err)
		}
	}
}
