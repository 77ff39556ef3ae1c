package redact

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds how many times JSON strings nested in JSON strings are
// opened.
const maxDepth = 4

// JSON redacts a JSON message: the bytes as Bytes does, and then every
// string literal that holds escapes, decoded — so that a value escaped
// twice (JSON text carried in a JSON string, as tool results often are)
// or an encoding whose characters were escaped (url.PathEscape's "&"
// written as \u0026) is caught in its decoded form. Last, a value split
// over string values that a reader joins (two text items of a tool
// result, two fields of its structuredContent) is redacted in each part:
// see joined. Strings without escapes are as Bytes saw them; formatting
// and key order are kept.
func (r *Redactor) JSON(raw []byte) []byte {
	return r.joined(r.strings(r.escapeSafe(raw), 0))
}

// escapeSafe is Bytes for JSON text: a match that begins or ends inside an
// escape sequence (a needle starting with the "n" of "\n", or a form cut
// in a "\u0026") is widened to the whole escape, so the result stays
// valid JSON.
func (r *Redactor) escapeSafe(raw []byte) []byte {
	hits := r.find(raw)
	out := make([]byte, 0, len(raw))
	pos := 0
	for _, h := range hits {
		from, to := escapeStart(raw, h.start), h.end
		if st := escapeStart(raw, to); st < to {
			to = st + 2
			if raw[st+1] == 'u' {
				to = st + 6
			}
		}
		if from < pos { // widened into the previous replacement
			from = pos
		}
		out = append(out, raw[pos:from]...)
		out = append(out, r.repl[r.owner[h.needle]]...)
		pos = min(to, len(raw))
	}
	return append(out, raw[pos:]...)
}

// escapeStart returns where the escape sequence holding b[p] starts when
// b[p] is inside one but not its backslash; otherwise p.
func escapeStart(b []byte, p int) int {
	if p <= 0 || p > len(b) {
		return p
	}
	if oddRun(b, p-1) {
		return p - 1 // b[p] is the letter after the backslash
	}
	for k := 2; k <= 5 && p-k >= 0; k++ {
		q := p - k
		if b[q] == '\\' && b[q+1] == 'u' && oddRun(b, q) && q+6 <= len(b) && allHex(b[q+2:p]) {
			return q
		}
	}
	return p
}

// oddRun reports whether b[i] is a backslash that starts an escape: the
// run of backslashes ending at i is odd.
func oddRun(b []byte, i int) bool {
	n := 0
	for ; i >= 0 && b[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func allHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func (r *Redactor) strings(b []byte, depth int) []byte {
	if depth >= maxDepth || bytes.IndexByte(b, '\\') < 0 {
		return b
	}
	var out []byte
	prev := 0
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		end := stringEnd(b, i)
		if end < 0 {
			break
		}
		lit := b[i : end+1]
		if bytes.IndexByte(lit, '\\') >= 0 {
			if s, ok := unquote(lit); ok {
				inner := r.strings(r.Bytes(s), depth+1)
				if !bytes.Equal(inner, s) {
					out = append(out, b[prev:i]...)
					out = append(out, quote(inner)...)
					prev = end + 1
				}
			}
		}
		i = end
	}
	if out == nil {
		return b
	}
	return append(out, b[prev:]...)
}

// stringEnd returns the index of the quote closing the string literal
// that starts at b[start], or -1.
func stringEnd(b []byte, start int) int {
	for i := start + 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// quote writes s as a JSON string without HTML escaping.
func quote(s []byte) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(string(s))
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// JSON is Redactor.JSON with the current values.
func (b *Book) JSON(p []byte) []byte {
	if r := b.r.Load(); r != nil {
		out := r.JSON(p)
		b.count(!bytes.Equal(out, p))
		return out
	}
	return p
}

// literal is a string value of a JSON message: b[start:end] is its
// literal, quotes included, and text its decoded content.
type literal struct {
	start, end int
	text       []byte
	typ        bool // the value of a member named "type"
	txt        bool // the value of a member named "text"
}

// joined redacts the values that span two or more string values when the
// message's string values are read in order and joined without a
// separator, as clients join the text items of a result. It looks at
// three sequences: every string value; every string value but those of
// members named "type" (which stand between the text of two content
// items); and the values of members named "text" alone (the text items,
// whatever else an item carries or lies between them: annotations,
// _meta, an image or a resource link). Each part of such a value is
// replaced by the marker; a value inside one string was replaced before.
func (r *Redactor) joined(b []byte) []byte {
	lits := stringValues(b)
	if len(lits) < 2 {
		return b
	}
	count := func(f func(literal) bool) int {
		n := 0
		for _, l := range lits {
			if f(l) {
				n++
			}
		}
		return n
	}
	typed := count(func(l literal) bool { return l.typ })
	texts := count(func(l literal) bool { return l.txt })
	sequences := []func(literal) bool{func(literal) bool { return true }}
	if typed > 0 {
		sequences = append(sequences, func(l literal) bool { return !l.typ })
	}
	if texts >= 2 && texts < len(lits)-typed {
		sequences = append(sequences, func(l literal) bool { return l.txt })
	}
	repl := map[int][]span{} // literal index -> parts to replace
	for _, in := range sequences {
		var cat []byte
		var seq, starts []int // seq[k]: literal of the k-th part, starting at cat[starts[k]]
		for k, l := range lits {
			if !in(l) {
				continue
			}
			seq = append(seq, k)
			starts = append(starts, len(cat))
			cat = append(cat, l.text...)
		}
		for _, h := range r.find(cat) {
			// The part holding position p: the last start at or before it
			// (empty literals share a start; the last of them holds p).
			part := func(p int) int {
				i, _ := slices.BinarySearch(starts, p+1)
				return i - 1
			}
			first, last := part(h.start), part(h.end-1)
			if first == last {
				continue
			}
			for k := first; k <= last; k++ {
				from := max(h.start, starts[k]) - starts[k]
				to := min(h.end, starts[k]+len(lits[seq[k]].text)) - starts[k]
				if from < to {
					repl[seq[k]] = append(repl[seq[k]], span{from, to, h.needle})
				}
			}
		}
	}
	if len(repl) == 0 {
		return b
	}
	var out []byte
	prev := 0
	for k, l := range lits {
		spans, ok := repl[k]
		if !ok {
			continue
		}
		out = append(out, b[prev:l.start]...)
		out = append(out, quote(r.replaceSpans(l.text, spans))...)
		prev = l.end
	}
	return append(out, b[prev:]...)
}

// span is a part [from, to) of a literal's text to replace by needle's
// marker.
type span struct {
	from, to int
	needle   int32
}

// replaceSpans replaces each span of text (possibly overlapping, found by
// the two passes of joined) by its needle's marker.
func (r *Redactor) replaceSpans(text []byte, spans []span) []byte {
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var out []byte
	pos := 0
	for _, s := range spans {
		if s.to <= pos {
			continue
		}
		if s.from > pos {
			out = append(out, text[pos:s.from]...)
		}
		out = append(out, r.repl[r.owner[s.needle]]...)
		pos = s.to
	}
	return append(out, text[pos:]...)
}

// stringValues returns the string values of a JSON message in order (not
// member names). It does not validate: on malformed input it returns what
// it found before the fault.
func stringValues(b []byte) []literal {
	var lits []literal
	var key []byte // the last member name, decoded
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		end := stringEnd(b, i)
		if end < 0 {
			break
		}
		lit := b[i : end+1]
		j := end + 1
		for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
			j++
		}
		if j < len(b) && b[j] == ':' {
			// As a client reads it: "te\u0078t" is "text".
			key = lit[1 : len(lit)-1]
			if bytes.IndexByte(lit, '\\') >= 0 {
				if s, ok := unquote(lit); ok {
					key = s
				}
			}
		} else {
			text := lit[1 : len(lit)-1]
			if bytes.IndexByte(text, '\\') >= 0 {
				s, ok := unquote(lit)
				if !ok {
					i = end
					continue
				}
				text = s
			}
			lits = append(lits, literal{start: i, end: end + 1, text: text, typ: string(key) == "type", txt: string(key) == "text"})
			key = nil
		}
		i = end
	}
	return lits
}

// unquote decodes a JSON string literal (quotes included) as
// encoding/json does. Well-formed UTF-8 with well-formed escapes takes a
// fast path; anything else (invalid UTF-8, which encoding/json replaces,
// control bytes, bad escapes) is left to encoding/json.
func unquote(lit []byte) ([]byte, bool) {
	body := lit[1 : len(lit)-1]
	if !utf8.Valid(body) {
		return slowUnquote(lit)
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c < 0x20 || c == '"' {
			return slowUnquote(lit)
		}
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 >= len(body) {
			return slowUnquote(lit)
		}
		i++
		switch body[i] {
		case '"', '\\', '/':
			out = append(out, body[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n := hex4(body[i+1:])
			if n < 0 {
				return slowUnquote(lit)
			}
			i += 4
			if utf16.IsSurrogate(r) {
				// A pair, or encoding/json's replacement for a lone half.
				r2, n2 := rune(-1), -1
				if i+2 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' {
					r2, n2 = hex4(body[i+3:])
				}
				if dec := utf16.DecodeRune(r, r2); n2 >= 0 && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return slowUnquote(lit)
		}
	}
	return out, true
}

// hex4 reads four hex digits: the rune and 4, or -1 if they are not.
func hex4(b []byte) (rune, int) {
	if len(b) < 4 {
		return 0, -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, -1
		}
		r = r<<4 | rune(c)
	}
	return r, 4
}

func slowUnquote(lit []byte) ([]byte, bool) {
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}
