package cli

import (
	"testing"

	"mcpbox/internal/audit"
)

// TestLogsToolFilter: `logs --tool` selects the same records by the
// client-visible name, the server's own name and SERVER/TOOL, and no
// record of another tool.
func TestLogsToolFilter(t *testing.T) {
	recs := []audit.Record{
		{Seq: 1, Server: "github", Tool: "create_issue", Name: "github__create_issue"},
		{Seq: 2, Server: "github", Tool: "list_issues", Name: "github__list_issues"},
		{Seq: 3, Server: "fs", Tool: "create_issue", Name: "f_create_issue"},
		{Seq: 4, Event: audit.EventSessionStart},
	}
	tests := []struct {
		arg  string
		want []int64
	}{
		{"github__create_issue", []int64{1}},
		{"f_create_issue", []int64{3}},
		{"create_issue", []int64{1, 3}}, // the servers' own name: both
		{"github/create_issue", []int64{1}},
		{"", []int64{1, 2, 3, 4}},
	}
	for _, tt := range tests {
		f := parseToolFilter(tt.arg)
		var got []int64
		for _, r := range recs {
			// The query's part of the filter, then match.
			if (f.server != "" && r.Server != f.server) || (f.tool != "" && r.Tool != f.tool) || !f.match(r) {
				continue
			}
			got = append(got, r.Seq)
		}
		if len(got) != len(tt.want) {
			t.Errorf("--tool %q selects %v, want %v", tt.arg, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("--tool %q selects %v, want %v", tt.arg, got, tt.want)
				break
			}
		}
	}
}
