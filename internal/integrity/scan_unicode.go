package integrity

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxSmuggled bounds the decoded tag-character text shown in a message.
const maxSmuggled = 160

// invisible reports tag, zero-width, bidi, variation-selector, format and
// control characters in the original text. A "\r\n" pair is an ordinary
// line end; a lone "\r" can overwrite a line on a terminal and counts.
func (s *scanner) invisible(f scanField) {
	t := f.text
	first, count := -1, 0
	var smuggled strings.Builder
	var kinds map[string]int // allocated on the first hit
	prev := rune(0)
	for i, r := range t {
		p := prev
		prev = r
		if r >= 0x20 && r < 0x7F {
			continue
		}
		if !invisibleRune(r) || r == '\r' && strings.HasPrefix(t[i+1:], "\n") || emojiPart(p, r, t[i+utf8.RuneLen(r):]) {
			continue
		}
		if first < 0 {
			first = i
		}
		count++
		if kinds == nil {
			kinds = map[string]int{}
		}
		kinds[invisibleKind(r)]++
		if r >= 0xE0000 && r <= 0xE007F && smuggled.Len() < maxSmuggled {
			if a := r - 0xE0000; a >= 0x20 && a < 0x7F {
				smuggled.WriteRune(a)
			}
		}
	}
	if count == 0 {
		return
	}
	_, size := utf8.DecodeRuneInString(t[first:])
	msg := fmt.Sprintf("%d invisible character(s) (%s)", count, kindList(kinds))
	if smuggled.Len() > 0 {
		msg += "; tag characters spell " + quoted(smuggled.String())
	}
	s.add(RuleInvisibleUnicode, f.where, t, first, first+size, msg)
}

func invisibleKind(r rune) string {
	switch {
	case r >= 0xE0000 && r <= 0xE007F:
		return "tag"
	case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF:
		return "zero-width"
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
		return "bidi"
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
		return "variation selector"
	case r < 0x20 || r == 0x7F || r >= 0x80 && r < 0xA0:
		return "control"
	}
	return "format"
}

// kindList renders counts in a fixed order, for stable messages.
func kindList(kinds map[string]int) string {
	var parts []string
	for _, k := range []string{"tag", "zero-width", "bidi", "variation selector", "control", "format"} {
		if n := kinds[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}

// confusableScripts are the scripts whose letters pass for Latin ones.
var confusableScripts = []*unicode.RangeTable{unicode.Cyrillic, unicode.Greek, unicode.Armenian, unicode.Cherokee}

// deceptive reports a name that mixes Latin with a look-alike script, is
// written entirely in look-alike letters, or uses fullwidth or
// mathematical letters. Names in one non-Latin script ("поиск") are
// honest unless every letter has a Latin twin.
func (s *scanner) deceptive(f scanField) {
	t := f.text
	latin, other, styled, folded := 0, 0, -1, 0
	first := -1
	for i, r := range t {
		switch {
		case r < utf8.RuneSelf:
			if unicode.IsLetter(r) {
				latin++
			}
		case r >= 0xFF01 && r <= 0xFF5E, r >= 0x1D400 && r <= 0x1D7FF:
			if styled < 0 {
				styled = i
			}
		case inAny(r, confusableScripts):
			other++
			if _, ok := confusables[r]; ok {
				folded++
			}
			if first < 0 {
				first = i
			}
		case unicode.Is(unicode.Latin, r):
			latin++
		}
	}
	switch {
	case styled >= 0:
		_, size := utf8.DecodeRuneInString(t[styled:])
		s.add(RuleDeceptiveUnicode, f.where, t, styled, styled+size, "name uses fullwidth or mathematical letters that look like ASCII: "+quoted(asciiEscaped(t)))
	case other > 0 && latin > 0:
		_, size := utf8.DecodeRuneInString(t[first:])
		s.add(RuleDeceptiveUnicode, f.where, t, first, first+size, "name mixes Latin with Cyrillic, Greek or other look-alike letters: "+quoted(asciiEscaped(t)))
	case other > 0 && folded == other:
		_, size := utf8.DecodeRuneInString(t[first:])
		s.add(RuleDeceptiveUnicode, f.where, t, first, first+size, "name is written in non-Latin letters that all look like Latin ones: "+quoted(asciiEscaped(t)))
	}
}

func inAny(r rune, tables []*unicode.RangeTable) bool {
	for _, t := range tables {
		if unicode.Is(t, r) {
			return true
		}
	}
	return false
}

// asciiEscaped shows every non-ASCII rune as \u{XXXX}, so a reader sees
// which letters are not what they look like.
func asciiEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf && r >= 0x20 && r != 0x7F {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, `\u{%04X}`, r)
		}
		if b.Len() > 80 {
			break
		}
	}
	return b.String()
}

// emojiPart reports whether r, after prev and before rest, is the
// variation selector or zero-width joiner of an emoji ("⚠️", "👩‍💻").
func emojiPart(prev, r rune, rest string) bool {
	switch r {
	case 0xFE0E, 0xFE0F:
		return prev >= 0x2000 && unicode.In(prev, unicode.So, unicode.Sm, unicode.Po) && prev != 0xFE0F
	case 0x200D:
		next, _ := utf8.DecodeRuneInString(rest)
		return (unicode.In(prev, unicode.So, unicode.Sk) || prev == 0xFE0F) && unicode.Is(unicode.So, next)
	}
	return false
}
