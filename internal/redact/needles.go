package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
)

// forms returns every encoded form of v that the redactor looks for, raw
// value first. Forms may repeat; the caller deduplicates them.
func forms(v []byte) [][]byte {
	out := [][]byte{v}
	lower := []byte(hex.EncodeToString(v))
	out = append(out, lower, bytes.ToUpper(lower))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for k := range 3 {
			out = append(out, base64Forms(enc, v, k)...)
		}
	}
	for _, esc := range []func([]byte) []byte{queryEscape, pathEscape} {
		e := esc(v)
		out = append(out, e, lowerPercent(e))
	}
	return append(out, jsonForms(v)...)
}

// base64Forms returns the parts of enc's encoding of v that do not depend
// on the bytes around v when v starts k bytes (0..2) after a 3-byte group
// boundary of a longer stream. Three needles: the stable core; the core
// plus the last character as written when the stream ends with v
// (unpadded); and that plus the padding. Leftmost-longest matching then
// removes the whole tail at the end of a stream and the core elsewhere.
func base64Forms(enc *base64.Encoding, v []byte, k int) [][]byte {
	buf := make([]byte, k+len(v))
	copy(buf[k:], v)
	padded := []byte(enc.EncodeToString(buf))
	// Character j carries bits [6j, 6j+6) of buf; it is stable when those
	// bits all belong to v, i.e. lie within [8k, 8len(buf)).
	first := (8*k + 5) / 6
	last := 8 * len(buf) / 6 // exclusive
	if first >= last {
		return nil
	}
	out := [][]byte{padded[first:last]}
	if len(buf)%3 != 0 {
		unpadded := len(buf) * 8 / 6
		if len(buf)*8%6 != 0 {
			unpadded++
		}
		out = append(out, padded[first:unpadded], padded[first:])
	}
	return out
}

// queryEscape is url.QueryEscape on bytes (this package does not import
// net/...; the tests check the two agree).
func queryEscape(v []byte) []byte {
	return percentEscape(v, func(c byte) bool { return !unreservedURL(c) }, true)
}

// pathEscape is url.PathEscape on bytes.
func pathEscape(v []byte) []byte {
	return percentEscape(v, func(c byte) bool {
		switch c {
		case '$', '&', '+', ':', '=', '@':
			return false
		}
		return !unreservedURL(c)
	}, false)
}

func unreservedURL(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '-' || c == '_' || c == '.' || c == '~'
}

func percentEscape(v []byte, escape func(byte) bool, spacePlus bool) []byte {
	const upper = "0123456789ABCDEF"
	out := make([]byte, 0, len(v)*3)
	for _, c := range v {
		switch {
		case c == ' ' && spacePlus:
			out = append(out, '+')
		case escape(c):
			out = append(out, '%', upper[c>>4], upper[c&15])
		default:
			out = append(out, c)
		}
	}
	return out
}

// lowerPercent lowers the hex digits of %XX escapes, as some encoders
// write them.
func lowerPercent(e []byte) []byte {
	out := bytes.Clone(e)
	for i := 0; i+2 < len(out); i++ {
		if out[i] == '%' {
			out[i+1] = toLowerHex(out[i+1])
			out[i+2] = toLowerHex(out[i+2])
			i += 2
		}
	}
	return out
}

func toLowerHex(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// jsonForms returns v escaped as encoding/json writes it inside a string,
// with and without HTML escaping of <, > and &.
func jsonForms(v []byte) [][]byte {
	var out [][]byte
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(html)
		if err := e.Encode(string(v)); err != nil {
			continue // cannot happen for a string
		}
		s := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		out = append(out, bytes.Clone(s[1:len(s)-1]))
	}
	return out
}
