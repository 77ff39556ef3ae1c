package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// forms returns every encoded form of v that the redactor looks for, raw
// value first. Forms may repeat; the caller deduplicates them.
func forms(v []byte) [][]byte {
	out := [][]byte{v}
	lower := []byte(hex.EncodeToString(v))
	out = append(out, lower, bytes.ToUpper(lower))
	var encoded [][]byte
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for k := range 3 {
			encoded = append(encoded, base64Forms(enc, v, k)...)
		}
	}
	for _, esc := range []func([]byte) []byte{queryEscape, pathEscape} {
		e := esc(v)
		encoded = append(encoded, e, lowerPercent(e))
	}
	for _, e := range encoded {
		out = append(append(out, e), escapedEncoding(e)...)
	}
	return append(out, jsonForms(v)...)
}

// escapedEncoding returns an encoded form e (base64: + / =; a query
// escape: +) as JSON writers that escape those write it inside a string,
// each writer one of them: / as \/ (PHP) or \u002f, + as \u002B (.NET),
// = as \u003d (Gson), in either case of hex. A listed host echoing a
// Basic credential through .NET's encoder handed out its base64 so.
func escapedEncoding(e []byte) [][]byte {
	var out [][]byte
	for _, c := range []byte("/+=") {
		if bytes.IndexByte(e, c) < 0 {
			continue
		}
		set := []byte{c}
		out = append(out, escapeSet(e, set, false, true), escapeSet(e, set, true, true))
		if c == '/' {
			out = append(out, escapeSet(e, set, false, false))
		}
	}
	return out
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

// jsonForms returns v escaped as JSON writers write it inside a string:
// encoding/json, with and without HTML escaping of <, > and &, and the
// writers that escape more of the characters JSON needs no escape for
// (escapable).
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
	out = append(out, escapedForms(out[len(out)-1])...)
	return append(out, asciiForms(v)...)
}

// asciiForms returns v as JSON writers that write ASCII only write it,
// for a value with other characters (a password with an umlaut): each
// as \uXXXX (a UTF-16 surrogate pair past U+FFFF) in either case of hex,
// as Python's json.dumps does by default; and so with .NET's set
// (+ < > & ' ` and " as \u0022), as System.Text.Json does by default.
func asciiForms(v []byte) [][]byte {
	if !utf8.Valid(v) || !slices.ContainsFunc([]rune(string(v)), func(r rune) bool { return r >= utf8.RuneSelf }) {
		return nil
	}
	var out [][]byte
	for _, extra := range []string{"", "+<>&'`\""} {
		for _, upper := range []bool{false, true} {
			out = append(out, asciiJSON(v, extra, upper))
		}
	}
	return out
}

// asciiJSON escapes v inside a JSON string with every character past
// ASCII and every one of extra as \uXXXX, the rest as encoding/json
// does without HTML escaping.
func asciiJSON(v []byte, extra string, upper bool) []byte {
	format := "\\u%04x"
	if upper {
		format = "\\u%04X"
	}
	var b bytes.Buffer
	for _, r := range string(v) {
		switch {
		case r >= utf8.RuneSelf:
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, format, u)
			}
		case strings.ContainsRune(extra, r):
			fmt.Fprintf(&b, format, r)
		default:
			e, _ := json.Marshal(string(r))
			e = bytes.ReplaceAll(e, []byte(`\u003c`), []byte("<"))
			e = bytes.ReplaceAll(e, []byte(`\u003e`), []byte(">"))
			e = bytes.ReplaceAll(e, []byte(`\u0026`), []byte("&"))
			b.Write(e[1 : len(e)-1])
		}
	}
	return b.Bytes()
}

// escapable are the characters that some JSON writers escape although
// JSON needs no escape for them, each writer all of those it escapes:
// PHP's json_encode writes / as \/ (and, with Laravel's and Symfony's
// flags, <, >, & and ' as \u003C ...); .NET's System.Text.Json + as
// \u002B, with <, >, &, ' and `; Gson = as \u003d, with <, >, & and ';
// encoding/json <, > and & as \u003c. A value escaped by any of them
// would pass a redactor that knows encoding/json's forms only. In
// encoding/json's output without HTML escaping they appear as themselves,
// and never inside an escape sequence.
const escapable = "/+=<>&'`"

// maxEscapableSets bounds escapedForms: a value with more distinct
// escapable characters than this gets the writers' sets only, not every
// set of them.
const maxEscapableSets = 4

// escapableSets are the sets of escapable characters the writers above
// escape, for values with too many distinct ones to try every set.
var escapableSets = []string{"/", "<>&", "<>&'/", "+<>&'`", "=<>&'"}

// escapedForms returns s, the value as encoding/json writes it without
// HTML escaping, with each set of the escapable characters it holds
// escaped as \u00XX (lower- and upper-case hex) or, for /, as \/ too.
func escapedForms(s []byte) [][]byte {
	var present []byte
	for _, c := range []byte(escapable) {
		if bytes.IndexByte(s, c) >= 0 {
			present = append(present, c)
		}
	}
	var sets [][]byte
	if len(present) <= maxEscapableSets {
		for mask := 1; mask < 1<<len(present); mask++ {
			var set []byte
			for i, c := range present {
				if mask&(1<<i) != 0 {
					set = append(set, c)
				}
			}
			sets = append(sets, set)
		}
	} else {
		for _, w := range escapableSets {
			sets = append(sets, []byte(w))
		}
	}
	var out [][]byte
	for _, set := range sets {
		for _, upper := range []bool{false, true} {
			for _, slashU := range []bool{false, true} {
				if !slashU && bytes.IndexByte(set, '/') < 0 {
					continue // the same form as with slashU
				}
				out = append(out, escapeSet(s, set, upper, slashU))
			}
		}
	}
	return out
}

// escapeSet escapes every byte of s in set: as \u00XX (upper-case hex if
// upper), or / as \/ unless slashU.
func escapeSet(s, set []byte, upper, slashU bool) []byte {
	digits := "0123456789abcdef"
	if upper {
		digits = "0123456789ABCDEF"
	}
	out := make([]byte, 0, len(s)+8)
	for _, c := range s {
		switch {
		case bytes.IndexByte(set, c) < 0:
			out = append(out, c)
		case c == '/' && !slashU:
			out = append(out, '\\', '/')
		default:
			out = append(out, '\\', 'u', '0', '0', digits[c>>4], digits[c&0xf])
		}
	}
	return out
}
