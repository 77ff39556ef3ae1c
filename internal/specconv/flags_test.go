package specconv

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/sandbox"
)

func TestParseMount(t *testing.T) {
	src := t.TempDir()
	tests := []struct {
		in      string
		want    sandbox.Mount
		wantErr string
	}{
		{src + ":/data", sandbox.Mount{Source: src, Target: "/data", Exec: true}, ""},
		{src + ":/data:rw", sandbox.Mount{Source: src, Target: "/data", Writable: true}, ""},
		{src + ":/data:ro", sandbox.Mount{Source: src, Target: "/data", Exec: true}, ""},
		{src + ":/data:rx", sandbox.Mount{}, "mode"},
		{src + ":data", sandbox.Mount{}, "absolute"},
		{src + ":/data/../etc", sandbox.Mount{}, "not clean"},
		{src + ":/workspace/input", sandbox.Mount{}, "the sandbox provides"},
		{src + ":/proc/x", sandbox.Mount{}, "kernel filesystem"},
		{"/no/such/dir:/data", sandbox.Mount{}, "no such file"},
		{"justone", sandbox.Mount{}, "want SRC:DST"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseMount(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseMount error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("parseMount (-want +got):\n%s", diff)
			}
		})
	}
}
