package workspace

import (
	"fmt"
	"io"
	"unicode/utf8"

	"mcpbox/internal/config"
)

// TermSafe returns a writer to w that writes what a terminal would act on
// as Go escapes: control characters but newline and tab (\xNN), C1
// controls and bidirectional overrides (\u009b, \u202e), and bytes that
// are not UTF-8 (\xNN, as a terminal in an 8-bit mode takes 0x9b for a
// control too). A file the sandbox wrote, shown by Diff, must not drive
// the reader's terminal (hide lines, rewrite or reorder what was shown).
// A character split between two writes is held until the next; Flush
// writes what is held (Diff calls it).
func TermSafe(w io.Writer) *TermWriter { return &TermWriter{w: w} }

// TermWriter is TermSafe's writer.
type TermWriter struct {
	w    io.Writer
	held []byte // the start of a character the next write ends
}

func (t *TermWriter) Write(p []byte) (int, error) {
	in := p
	if len(t.held) > 0 {
		in = append(t.held, p...)
		t.held = nil
	}
	b := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		c := in[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n' || c == '\t':
				b = append(b, c)
			case c < 0x20 || c == 0x7f:
				b = fmt.Appendf(b, "\\x%02x", c)
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		if !utf8.FullRune(in[i:]) {
			t.held = append([]byte(nil), in[i:]...)
			break
		}
		r, n := utf8.DecodeRune(in[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = fmt.Appendf(b, "\\x%02x", c)
		case config.ActsOnTerminal(r):
			b = fmt.Appendf(b, "\\u%04x", r)
		default:
			b = append(b, in[i:i+n]...)
		}
		i += n
	}
	if _, err := t.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is held of a character no write completed, escaped.
func (t *TermWriter) Flush() error {
	var b []byte
	for _, c := range t.held {
		b = fmt.Appendf(b, "\\x%02x", c)
	}
	t.held = nil
	if len(b) == 0 {
		return nil
	}
	_, err := t.w.Write(b)
	return err
}
