package integrity

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// blobs reports encoded runs. In prose every long run counts; in value
// slots (default, examples, enum, const) encoded data is normal, so only
// a run that decodes to readable text counts: a base64 PNG as an example
// is data, a base64 sentence is a message to the model.
func (s *scanner) blobs(f scanField) {
	t := f.text
	onlyText := f.kind == valueField
	report := func(start, end int, what string, decoded []byte, ok bool) {
		text := ok && readable(decoded)
		if onlyText && !text {
			return
		}
		msg := fmt.Sprintf("%s of %d chars", what, end-start)
		switch {
		case text:
			msg += " decodes to text: " + quoted(string(decoded))
		case ok:
			msg += fmt.Sprintf(" decodes to %d bytes of binary data", len(decoded))
		}
		s.add(RuleEncodedBlob, f.where, t, start, end, msg)
	}
	s.dataURIs(t, report)
	byteRuns(t, isBase64Byte, func(a, b int) {
		for b < len(t) && t[b] == '=' {
			b++
		}
		run := t[a:b]
		if len(strings.TrimRight(run, "=")) < MinBase64Run || !mixedClasses(run) {
			return
		}
		d, ok := decodeBase64(run)
		report(a, b, "base64 run", d, ok)
	})
	byteRuns(t, isHexByte, func(a, b int) {
		if b-a >= MinHexRun && (a == 0 || !isBase64Byte(t[a-1])) && (b == len(t) || !isBase64Byte(t[b])) {
			d, err := hex.DecodeString(t[a : b-(b-a)%2])
			report(a, b, "hex run", d, err == nil)
		}
	})
	byteRuns(t, isURLByte, func(a, b int) {
		if d, n := percentDecode(t[a:b]); n >= MinPercentEscapes {
			report(a, b, fmt.Sprintf("percent-encoded run (%d escapes)", n), d, true)
		}
	})
}

// dataURIs finds "data:" URIs (RFC 2397) not preceded by a letter, so
// "metadata:" is not one.
func (s *scanner) dataURIs(t string, report func(int, int, string, []byte, bool)) {
	for from := 0; ; {
		k := indexFold(t[from:], "data:")
		if k < 0 {
			return
		}
		k += from
		from = k + 5
		if k > 0 && identByte(lowerASCII(t[k-1])) {
			continue
		}
		comma := strings.IndexByte(t[from:min(len(t), from+128)], ',')
		if comma < 0 || !mediaType(t[from:from+comma]) {
			continue
		}
		end := from + comma + 1
		for end < len(t) && (isBase64Byte(t[end]) || t[end] == '=' || t[end] == '%') {
			end++
		}
		meta, payload := t[from:from+comma], t[from+comma+1:end]
		var d []byte
		ok := true
		if strings.HasSuffix(strings.ToLower(meta), ";base64") {
			d, ok = decodeBase64(payload)
		} else {
			d, _ = percentDecode(payload)
		}
		report(k, end, "data: URI", d, ok)
	}
}

// mediaType accepts "", "text/plain", "image/png;base64", ";base64".
func mediaType(m string) bool {
	for i := 0; i < len(m); i++ {
		c := lowerASCII(m[i])
		if !(identByte(c) || strings.IndexByte("/;=.+-", c) >= 0) {
			return false
		}
	}
	return m == "" || strings.Contains(m, "/") || strings.HasPrefix(m, ";")
}

// byteRuns calls f for every maximal run of bytes in t accepted by in.
func byteRuns(t string, in func(byte) bool, f func(a, b int)) {
	start := -1
	for i := 0; i <= len(t); i++ {
		if i < len(t) && in(t[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			f(start, i)
			start = -1
		}
	}
}

func isBase64Byte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_'
}

func isHexByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isURLByte(c byte) bool {
	return isBase64Byte(c) || c == '%' || c == '.' || c == '~'
}

// mixedClasses tells encoded data from long paths and identifiers: base64
// of anything but a few bytes mixes upper case, lower case and digits,
// and has few separators.
func mixedClasses(run string) bool {
	var upper, lower, digit, sep int
	for i := 0; i < len(run); i++ {
		switch c := run[i]; {
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= 'a' && c <= 'z':
			lower++
		case c >= '0' && c <= '9':
			digit++
		case c == '/' || c == '-' || c == '_':
			sep++
		}
	}
	return upper > 0 && lower > 0 && digit > 0 && sep <= len(run)/10
}

// decodeBase64 decodes standard or URL-safe base64, padded or not.
func decodeBase64(run string) ([]byte, bool) {
	run = strings.TrimRight(run, "=")
	if len(run)%4 == 1 {
		run = run[:len(run)-1]
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(run, "-_") {
		enc = base64.RawURLEncoding
	}
	d, err := enc.DecodeString(run)
	return d, err == nil
}

// percentDecode decodes %XX escapes and counts them.
func percentDecode(s string) ([]byte, int) {
	out := make([]byte, 0, len(s))
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHexByte(s[i+1]) && isHexByte(s[i+2]) {
			b, _ := hex.DecodeString(s[i+1 : i+3])
			out = append(out, b[0])
			n++
			i += 2
			continue
		}
		out = append(out, s[i])
	}
	return out, n
}

// readable reports whether b is mostly printable UTF-8 text.
func readable(b []byte) bool {
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	var good, all int
	for _, r := range string(b) {
		all++
		if unicode.IsPrint(r) || r == '\n' || r == '\t' || r == '\r' {
			good++
		}
	}
	return good*10 >= all*9
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// indexFold is strings.Index for an ASCII lower-case needle, ignoring the
// case of s.
func indexFold(s, needle string) int {
	for i := 0; i+len(needle) <= len(s); i++ {
		if lowerASCII(s[i]) == needle[0] && strings.EqualFold(s[i:i+len(needle)], needle) {
			return i
		}
	}
	return -1
}
