package workspace

import (
	"fmt"
	"io"
)

// TermSafe returns a writer to w that writes control characters (but
// newline and tab) as \xNN, and C1 controls as \u00NN: a file the sandbox
// wrote, shown by Diff, must not drive the reader's terminal (hide lines,
// rewrite what was shown).
func TermSafe(w io.Writer) io.Writer { return termSafe{w} }

type termSafe struct{ w io.Writer }

func (t termSafe) Write(p []byte) (int, error) {
	var b []byte
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\n' || c == '\t':
			b = append(b, c)
		case c < 0x20 || c == 0x7f:
			b = fmt.Appendf(b, "\\x%02x", c)
		case c == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] < 0xa0:
			b = fmt.Appendf(b, "\\u%04x", p[i+1])
			i++
		default:
			b = append(b, c)
		}
	}
	if _, err := t.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}
