package integrity

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// strictParser is a strict RFC 8259 parser. encoding/json is not used for input
// because it keeps the last of duplicate keys and replaces invalid UTF-8
// and lone surrogates silently: two different byte strings would then pin
// as one definition, and a client may read the duplicate the other way.
type strictParser struct {
	data  []byte
	pos   int
	depth int
}

// parseStrict returns nil, bool, float64, string, []any or map[string]any.
func parseStrict(data []byte) (any, error) {
	p := &strictParser{data: data}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.errorf("trailing data")
	}
	return v, nil
}

func (p *strictParser) errorf(format string, args ...any) error {
	return fmt.Errorf("parsing JSON at offset %d: %w: %s", p.pos, ErrInvalidJSON, fmt.Sprintf(format, args...))
}

func (p *strictParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *strictParser) value() (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	for _, lit := range jsonLiterals {
		if bytes.HasPrefix(p.data[p.pos:], lit.text) {
			p.pos += len(lit.text)
			return lit.v, nil
		}
	}
	return nil, p.errorf("unexpected character %q", p.data[p.pos])
}

var jsonLiterals = []struct {
	text []byte
	v    any
}{{[]byte("true"), true}, {[]byte("false"), false}, {[]byte("null"), nil}}

// enter bounds nesting depth; the caller decrements it on return.
func (p *strictParser) enter() error {
	p.depth++
	if p.depth > maxNesting {
		return p.errorf("nested deeper than %d", maxNesting)
	}
	return nil
}

func (p *strictParser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.pos++ // {
	m := map[string]any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return m, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("expected object key")
		}
		at := p.pos
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			p.pos = at
			return nil, fmt.Errorf("parsing JSON at offset %d: %w %q", at, ErrDuplicateKey, k)
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("expected ':'")
		}
		p.pos++
		p.skipSpace()
		if m[k], err = p.value(); err != nil {
			return nil, err
		}
		if done, err := p.next('}'); done || err != nil {
			return m, err
		}
	}
}

func (p *strictParser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.pos++ // [
	a := []any{}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return a, nil
	}
	for {
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if done, err := p.next(']'); done || err != nil {
			return a, err
		}
	}
}

// next consumes ',' (more members follow) or end (done).
func (p *strictParser) next(end byte) (done bool, err error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return false, p.errorf("unexpected end of input")
	}
	switch p.data[p.pos] {
	case ',':
		p.pos++
		return false, nil
	case end:
		p.pos++
		return true, nil
	}
	return false, p.errorf("expected ',' or %q", end)
}

func (p *strictParser) number() (any, error) {
	start := p.pos
	p.accept("-")
	if !p.accept("0") {
		if !p.digits() {
			return nil, p.errorf("malformed number")
		}
	}
	if p.accept(".") && !p.digits() {
		return nil, p.errorf("malformed number")
	}
	if p.accept("eE") {
		p.accept("+-")
		if !p.digits() {
			return nil, p.errorf("malformed number")
		}
	}
	f, err := strconv.ParseFloat(string(p.data[start:p.pos]), 64)
	if err != nil { // only ErrRange: the grammar was checked above
		p.pos = start
		return nil, p.errorf("number %s out of float64 range", p.data[start:min(len(p.data), start+40)])
	}
	return f, nil
}

// accept consumes one byte if it is one of set.
func (p *strictParser) accept(set string) bool {
	if p.pos < len(p.data) && strings.IndexByte(set, p.data[p.pos]) >= 0 {
		p.pos++
		return true
	}
	return false
}

func (p *strictParser) digits() bool {
	start := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}

func (p *strictParser) str() (string, error) {
	p.pos++ // "
	var sb strings.Builder
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return sb.String(), nil
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			sb.WriteRune(r)
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c < utf8.RuneSelf:
			sb.WriteByte(c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", p.errorf("invalid UTF-8")
			}
			sb.WriteRune(r)
			p.pos += size
		}
	}
	return "", p.errorf("unterminated string")
}

// escape decodes one escape sequence, joining a surrogate pair.
func (p *strictParser) escape() (rune, error) {
	if p.pos+1 >= len(p.data) {
		return 0, p.errorf("unterminated escape")
	}
	p.pos += 2
	switch c := p.data[p.pos-1]; c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		return p.unicodeEscape()
	}
	return 0, p.errorf("invalid escape")
}

func (p *strictParser) unicodeEscape() (rune, error) {
	r, ok := p.hex4()
	if !ok {
		return 0, p.errorf("invalid \\u escape")
	}
	if !utf16.IsSurrogate(r) {
		return r, nil
	}
	if r < 0xdc00 && p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
		p.pos += 2
		if lo, ok := p.hex4(); ok {
			if j := utf16.DecodeRune(r, lo); j != utf8.RuneError {
				return j, nil
			}
		}
	}
	return 0, p.errorf("lone surrogate in \\u escape")
}

func (p *strictParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 16)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(v), true
}
