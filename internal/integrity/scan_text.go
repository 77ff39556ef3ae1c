package integrity

import (
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"
)

// normText is a string folded for matching: invisible characters dropped
// (tag characters decoded to the ASCII they spell), fullwidth and
// look-alike letters folded to ASCII, lower case, every run of white space
// one space. off maps each byte of s back to the byte
// offset of the original rune, so hits are reported on the original.
type normText struct {
	s   string
	off []int32
}

// span returns the original byte range of the normalized range [i, j).
func (n normText) span(orig string, i, j int) (int, int) {
	if i >= len(n.off) {
		return len(orig), len(orig)
	}
	start := int(n.off[i])
	end := len(orig)
	if j < len(n.off) {
		end = int(n.off[j])
	}
	return start, max(start, end)
}

// normalize folds s for the text rules. splitIdent also turns '_' and '-'
// into spaces, so phrases written as identifiers ("ignore_previous_rules")
// match too.
func normalize(s string, splitIdent bool) normText {
	buf := make([]byte, 0, len(s))
	off := make([]int32, 0, len(s))
	space := true // drop leading space
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		at := int32(i)
		i += size
		if r >= 0x20 && r < 0x7F && r != ' ' && !(splitIdent && (r == '_' || r == '-')) {
			// Printable ASCII, the common case.
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			buf = append(buf, byte(r))
			off = append(off, at)
			space = false
			continue
		}
		if invisibleRune(r) && (r < 0xE0020 || r > 0xE007E) {
			continue
		}
		r = foldRune(r)
		if splitIdent && (r == '_' || r == '-') || r == ' ' || unicode.IsSpace(r) {
			if !space {
				buf = append(buf, ' ')
				off = append(off, at)
			}
			space = true
			continue
		}
		space = false
		n := len(buf)
		buf = utf8.AppendRune(buf, r)
		for ; n < len(buf); n++ {
			off = append(off, at)
		}
	}
	return normText{s: string(buf), off: off}
}

// foldRune maps fullwidth forms, look-alike Cyrillic and Greek letters and
// typographic quotes to ASCII, and lowers case.
func foldRune(r rune) rune {
	switch {
	case r < utf8.RuneSelf:
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	case r >= 0xE0020 && r <= 0xE007E:
		// Tag characters are ASCII the user cannot see but the model
		// reads: match the text they spell.
		return foldRune(r - 0xE0000)
	case r >= 0xFF01 && r <= 0xFF5E: // fullwidth ASCII
		return foldRune(r - 0xFEE0)
	case r == 0x3000 || r == 0xA0:
		return ' '
	case r == '\u2018' || r == '\u2019' || r == '\u02BC':
		return '\''
	}
	if a, ok := confusables[r]; ok {
		return a
	}
	if a, ok := mathLetter(r); ok {
		return a
	}
	return unicode.ToLower(r)
}

// confusables are the Cyrillic, Greek and other letters that render like
// ASCII letters in common fonts (a small subset of Unicode TR39's table).
var confusables = map[rune]rune{
	'а': 'a', 'в': 'b', 'е': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'с': 'c', 'т': 't', 'у': 'y', 'х': 'x',
	'А': 'a', 'В': 'b', 'Е': 'e', 'К': 'k', 'М': 'm', 'Н': 'h', 'О': 'o', 'Р': 'p', 'С': 'c', 'Т': 't', 'У': 'y', 'Х': 'x',
	'і': 'i', 'І': 'i', 'ј': 'j', 'Ј': 'j', 'ѕ': 's', 'Ѕ': 's', 'ԁ': 'd', 'һ': 'h', 'ӏ': 'l', 'Ӏ': 'l', 'ԛ': 'q', 'ԝ': 'w', 'ү': 'y',
	'α': 'a', 'ο': 'o', 'ρ': 'p', 'ν': 'v', 'ι': 'i', 'κ': 'k', 'τ': 't', 'υ': 'u', 'χ': 'x', 'ε': 'e',
	'Α': 'a', 'Β': 'b', 'Ε': 'e', 'Ζ': 'z', 'Η': 'h', 'Ι': 'i', 'Κ': 'k', 'Μ': 'm', 'Ν': 'n', 'Ο': 'o', 'Ρ': 'p', 'Τ': 't', 'Υ': 'y', 'Χ': 'x',
	'ı': 'i', 'ℓ': 'l',
}

// mathLetter folds the Mathematical Alphanumeric Symbols block (bold,
// italic, script, ... A-Z a-z), which renders as styled Latin.
func mathLetter(r rune) (rune, bool) {
	if r < 0x1D400 || r > 0x1D6A3 {
		return 0, false
	}
	i := (r - 0x1D400) % 52
	if i < 26 {
		return 'a' + i, true
	}
	return 'a' + i - 26, true
}

// invisibleRune reports whether r renders as nothing (or moves text) while
// the model still reads it. \n and \t are ordinary; \r is judged in
// context by the invisible-unicode rule and dropped here.
func invisibleRune(r rune) bool {
	switch {
	case r >= 0x20 && r < 0x7F, r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7F || (r >= 0x80 && r < 0xA0):
		return true
	case r >= 0xE0000 && r <= 0xE007F: // tags
		return true
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF: // variation selectors
		return true
	case r == 0x115F || r == 0x1160 || r == 0x3164 || r == 0xFFA0: // Hangul fillers
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// appendEscaped appends r, or \u{XXXX} when it must not be shown raw.
func appendEscaped(b []byte, r rune, size int) []byte {
	switch {
	case r == utf8.RuneError && size == 1:
		return append(b, `\u{FFFD}`...)
	case r == '\n' || r == '\t' || invisibleRune(r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r):
		return fmt.Appendf(b, `\u{%04X}`, r)
	}
	return utf8.AppendRune(b, r)
}

// Escaped is s as the scanner shows it: every character that does not
// show as itself (controls, line breaks, bidi overrides, zero-width and
// tag characters, variation selectors) written as \u{XXXX}, so that it
// cannot move a terminal's cursor or reorder what a reviewer reads.
func Escaped(s string) string { return escapeText(s, math.MaxInt) }

// escapeText escapes s and cuts it to at most limit bytes on a character
// boundary.
func escapeText(s string, limit int) string {
	b := make([]byte, 0, min(len(s), limit))
	var one [16]byte
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		e := appendEscaped(one[:0], r, size)
		if len(b)+len(e) > limit {
			break
		}
		b = append(b, e...)
		i += size
	}
	return string(b)
}

// excerpt shows s[start:end] with some context, escaped, in at most
// MaxExcerptBytes bytes: the hit first, then context on both sides.
func excerpt(s string, start, end int) string {
	start, end = clampRange(s, start, end)
	hit := escapeText(s[start:end], MaxExcerptBytes)
	room := MaxExcerptBytes - len(hit)
	left := escapeTail(s[:start], room/2)
	right := escapeText(s[end:], room-len(left))
	return left + hit + right
}

// escapeTail is escapeText from the end: the last characters of s that fit.
func escapeTail(s string, limit int) string {
	var parts [][]byte
	n := 0
	for i := len(s); i > 0; {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		e := appendEscaped(nil, r, size)
		if n+len(e) > limit {
			break
		}
		parts = append(parts, e)
		n += len(e)
		i -= size
	}
	b := make([]byte, 0, n)
	for i := len(parts) - 1; i >= 0; i-- {
		b = append(b, parts[i]...)
	}
	return string(b)
}

// clampRange keeps [start, end) inside s and on rune boundaries.
func clampRange(s string, start, end int) (int, int) {
	start = min(max(start, 0), len(s))
	end = min(max(end, start), len(s))
	for start > 0 && start < len(s) && !utf8.RuneStart(s[start]) {
		start--
	}
	for end < len(s) && !utf8.RuneStart(s[end]) {
		end++
	}
	return start, end
}

// oneLine escapes msg and bounds it, for Finding.Message.
func oneLine(msg string, limit int) string {
	return escapeText(msg, limit)
}

// quoted shows a matched phrase of normalized text in a message.
func quoted(s string) string {
	return `"` + escapeText(s, 80) + `"`
}
