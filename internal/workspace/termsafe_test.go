package workspace

import (
	"bytes"
	"testing"
)

// TestTermSafe: what a sandbox wrote cannot drive the terminal that shows
// its diff, however its bytes fall into writes: a C1 control split
// between two writes (Diff writes 4 KiB at a time) is escaped too, and a
// character split so is passed whole.
func TestTermSafe(t *testing.T) {
	for _, tc := range []struct {
		writes []string
		want   string
	}{
		{[]string{"+ok\tline\n+\x1b[2K\rhidden\x7f \u009b x é\n"}, "+ok\tline\n+\\x1b[2K\\x0dhidden\\x7f \\u009b x é\n"},
		{[]string{"+a\xc2", "\x9b2J"}, "+a\\u009b2J"},              // CSI split after its first byte
		{[]string{"+caf\xc3", "\xa9 \xe2\x82", "\xac"}, "+café €"}, // characters split, shown whole
		{[]string{"+if admin \u202e} \u2066"}, "+if admin \\u202e} \\u2066"},
		{[]string{"+latin1 \xe9t\xe9 \x9b"}, "+latin1 \\xe9t\\xe9 \\x9b"}, // not UTF-8: 0x9b is CSI to an 8-bit terminal
		{[]string{"+end \xe2\x82"}, "+end \\xe2\\x82"},                    // cut short at the end: Flush
	} {
		var b bytes.Buffer
		w := TermSafe(&b)
		for _, s := range tc.writes {
			if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", s, n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("writes %q: got %q, want %q", tc.writes, b.String(), tc.want)
		}
	}
}
