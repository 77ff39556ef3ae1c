package redact

import (
	"bytes"
	"encoding/json"
)

// maxDepth bounds how many times JSON strings nested in JSON strings are
// opened.
const maxDepth = 4

// JSON redacts a JSON message: the bytes as Bytes does, and then every
// string literal that holds escapes, decoded — so that a value escaped
// twice (JSON text carried in a JSON string, as tool results often are)
// or an encoding whose characters were escaped (url.PathEscape's "&"
// written as \u0026) is caught in its decoded form. Strings without
// escapes are as Bytes saw them; formatting and key order are kept.
func (r *Redactor) JSON(raw []byte) []byte {
	return r.strings(r.Bytes(raw), 0)
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
			var s string
			if json.Unmarshal(lit, &s) == nil {
				inner := r.strings(r.Bytes([]byte(s)), depth+1)
				if !bytes.Equal(inner, []byte(s)) {
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
		return r.JSON(p)
	}
	return p
}
