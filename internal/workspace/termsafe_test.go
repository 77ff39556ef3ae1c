package workspace

import (
	"bytes"
	"testing"
)

// TestTermSafe: what a sandbox wrote cannot drive the terminal that shows
// its diff.
func TestTermSafe(t *testing.T) {
	var b bytes.Buffer
	TermSafe(&b).Write([]byte("+ok\tline\n+\x1b[2K\rhidden\x7f \u009b x é\n"))
	want := "+ok\tline\n+\\x1b[2K\\x0dhidden\\x7f \\u009b x é\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}
