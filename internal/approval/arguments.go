package approval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxArguments is the largest Request.Arguments, in bytes of JSON, that
// Ask holds for a human; a larger request is refused with
// ErrArgumentsTooLarge (the call is denied) rather than shown in part.
const MaxArguments = 1 << 20

// foldAt is how many characters of a long string or key Show prints
// before it folds the rest into a count; the whole value is in
// Request.Arguments (mcpbox approvals --json, the web endpoint).
const foldAt = 200

// prepareArguments checks and compacts a request's arguments: a copy,
// valid JSON (text that is not JSON is kept as a JSON string of it), at
// most MaxArguments bytes.
func prepareArguments(args json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		return nil, nil
	}
	if len(args) > MaxArguments {
		return nil, fmt.Errorf("holding %d bytes of arguments for approval: %w", len(args), ErrArgumentsTooLarge)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, args) != nil {
		q, _ := json.Marshal(strings.ToValidUTF8(string(args), "\uFFFD"))
		return q, nil
	}
	return buf.Bytes(), nil
}

// Show renders a call's arguments for the approver, every key at every
// depth and in the order sent: one line per top-level argument, indented
// by two spaces, the key quoted (Go syntax, so a newline, escape or
// bidirectional override in a key or value prints as \n, \x1b, \u202e
// and cannot pose as the approver's prompt); strings and keys longer than
// 200 characters are folded to their start and a count. Nested objects and
// arrays are shown whole on their argument's line.
func Show(args json.RawMessage) string {
	text, _ := show(args)
	return text
}

// show is Show and the number of top-level arguments it shows.
func show(args json.RawMessage) (string, int) {
	if len(bytes.TrimSpace(args)) == 0 {
		return "  (no arguments)", 0
	}
	s := &shower{dec: json.NewDecoder(bytes.NewReader(args))}
	s.dec.UseNumber()
	err := s.top()
	if err == nil {
		if _, err = s.dec.Token(); err == io.EOF {
			err = nil
		} else if err == nil {
			err = fmt.Errorf("trailing data")
		}
	}
	if err != nil {
		return fmt.Sprintf("  (arguments are not valid JSON, %d bytes)", len(args)), 0
	}
	return strings.TrimSuffix(s.out.String(), "\n"), s.n
}

type shower struct {
	dec *json.Decoder
	out strings.Builder
	n   int // top-level arguments shown
}

// top writes an object one member a line, anything else on one line.
func (s *shower) top() error {
	tok, err := s.dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		s.out.WriteString("  ")
		if err := s.token(tok); err != nil {
			return err
		}
		s.out.WriteString("\n")
		s.n = 1
		return nil
	}
	for ; s.dec.More(); s.n++ {
		tok, err := s.dec.Token()
		if err != nil {
			return err
		}
		k, _ := tok.(string)
		s.out.WriteString("  " + fold(k) + ": ")
		if err := s.value(); err != nil {
			return err
		}
		s.out.WriteString("\n")
	}
	if s.n == 0 {
		s.out.WriteString("  {}\n")
	}
	_, err = s.dec.Token()
	return err
}

func (s *shower) value() error {
	tok, err := s.dec.Token()
	if err != nil {
		return err
	}
	return s.token(tok)
}

// token writes the value that starts with tok.
func (s *shower) token(tok json.Token) error {
	switch v := tok.(type) {
	case json.Delim:
		return s.nested(v)
	case string:
		s.out.WriteString(fold(v))
	case json.Number:
		s.out.WriteString(string(v))
	case bool:
		s.out.WriteString(strconv.FormatBool(v))
	case nil:
		s.out.WriteString("null")
	default:
		return fmt.Errorf("unexpected token %v", tok)
	}
	return nil
}

// nested writes an object or array opened by d, on one line.
func (s *shower) nested(d json.Delim) error {
	obj := d == '{'
	s.out.WriteString(string(d))
	for i := 0; s.dec.More(); i++ {
		if i > 0 {
			s.out.WriteString(", ")
		}
		if obj {
			tok, err := s.dec.Token()
			if err != nil {
				return err
			}
			k, _ := tok.(string)
			s.out.WriteString(fold(k) + ": ")
		}
		if err := s.value(); err != nil {
			return err
		}
	}
	end, err := s.dec.Token()
	if err != nil {
		return err
	}
	s.out.WriteString(fmt.Sprint(end))
	return nil
}

// fold quotes a string, cut to foldAt characters and its length when
// longer.
func fold(v string) string {
	n := utf8.RuneCountInString(v)
	if n <= foldAt {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%s…(%d chars)", strconv.Quote(string([]rune(v)[:foldAt])), n)
}
