package dashboard

import (
	"io"

	"mcpbox/internal/workspace"
)

// workspaceDiff writes the unified diff of an overlay's upper dir over
// its lower dir.
func workspaceDiff(w io.Writer, lower, upper string) error { return workspace.Diff(w, lower, upper) }
