package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Message is the question put to a human, naming the tool by
// Request.Name (as the client calls it) when set, else SERVER.TOOL. With
// Arguments, every one of them follows the question, one line each (see
// Show):
//
//	Allow github__create_pull_request (client claude-desktop)? Rule: servers.github.tools.approve
//	Arguments (2):
//	  "repo": "octo/x"
//	  "title": "Fix the build"
//
// Without, it is one line with the summary:
//
//	Allow github__create_pull_request (client claude-desktop) — {"repo": "octo/x", "title": string(20)}? Rule: servers.github.tools.approve
func (b *Broker) Message(req Request) string {
	var m strings.Builder
	target := clean(req.Server) + "." + clean(req.Tool)
	if req.Name != "" {
		target = clean(req.Name) // the one spelling the client and its user know
	}
	if req.Kind == KindTrust {
		m.WriteString("Trust the changed definition of " + target)
	} else {
		m.WriteString("Allow " + target)
	}
	if req.Client != "" {
		m.WriteString(" (client " + clean(req.Client) + ")")
	}
	if req.Summary != "" && len(req.Arguments) == 0 {
		m.WriteString(" — " + cut(clean(req.Summary), MaxSummary))
	}
	m.WriteString("?")
	if req.Rule != "" {
		m.WriteString(" Rule: " + clean(req.Rule))
	}
	if len(req.Arguments) > 0 {
		text, n := show(req.Arguments)
		fmt.Fprintf(&m, "\nArguments (%d):\n%s", n, text)
	}
	// The choices are once, session and deny (elicitChoices).
	if note := WiderNote(req, ScopeSession, req.Rule); note != "" {
		m.WriteString("\nFor the session: " + note + ".")
	}
	return m.String()
}

// WiderNote says what approving req for scope (ScopeSession or
// ScopeAlways; "" for either) grants when the rule that held it has a
// when: condition: the decision is for the tool, not for calls like this
// one. It is "" for any other request or scope. rule names the rule.
func WiderNote(req Request, scope, rule string) string {
	if !req.Conditional || req.Kind == KindTrust || scope == ScopeOnce {
		return ""
	}
	who := "client " + clean(req.Client)
	if scope == ScopeSession {
		who += "'s session"
	}
	return fmt.Sprintf("every later call of %s/%s by %s that needs approval runs without asking, whatever its arguments: the condition (when:) of %s no longer holds one back", clean(req.Server), clean(req.Tool), who, clean(rule))
}

// Summary limits.
const (
	maxShown = 40 // characters of a string, number or key shown
	maxItems = 5  // array items shown
	maxDepth = 3  // object and array nesting shown
)

var errFull = errors.New("summary full")

// Summary makes a short human summary of call arguments (a JSON value) for
// the approver, at most MaxSummary characters, keeping the order of keys,
// which are quoted. It is a one-line overview for tables; Show and
// Request.Arguments hold every argument.
//
// It exists to show argument values: with a non-nil redact, strings and
// numbers pass through redact first and then up to 40 characters of them
// are shown, so the approver sees which repository or path a call touches.
// The summary is for the approver alone, and it is stored (so redacted) in
// the approval_requests table; it must never go to a log or client that
// argument values may not reach. With a nil redact only keys, types and
// lengths are shown: {"repo": string(8)}.
func Summary(args json.RawMessage, redact func(string) string) string {
	if len(bytes.TrimSpace(args)) == 0 {
		return "(no arguments)"
	}
	s := &summarizer{dec: json.NewDecoder(bytes.NewReader(args)), redact: redact}
	s.dec.UseNumber()
	err := s.value(0)
	if err == nil {
		if _, err = s.dec.Token(); err == io.EOF {
			err = nil
		} else if err == nil {
			err = errors.New("trailing data")
		}
	}
	switch {
	case errors.Is(err, errFull):
		return cut(s.out.String(), MaxSummary)
	case err != nil:
		return fmt.Sprintf("(arguments are not valid JSON, %d bytes)", len(args))
	}
	return cut(s.out.String(), MaxSummary)
}

type summarizer struct {
	dec    *json.Decoder
	redact func(string) string
	out    strings.Builder
}

// write appends text; errFull once the summary cannot grow any more, which
// ends the walk early however large the arguments are.
func (s *summarizer) write(text ...string) error {
	for _, t := range text {
		s.out.WriteString(t)
	}
	if s.out.Len() > 4*MaxSummary { // bytes; characters are cut to MaxSummary later
		return errFull
	}
	return nil
}

func (s *summarizer) value(depth int) error {
	tok, err := s.dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return s.skipped(v)
		}
		if v == '{' {
			return s.object(depth)
		}
		return s.array(depth)
	case string:
		return s.write(s.shown(v, "string"))
	case json.Number:
		return s.write(s.shown(string(v), "number"))
	case bool:
		return s.write(strconv.FormatBool(v))
	case nil:
		return s.write("null")
	}
	return fmt.Errorf("unexpected token %v", tok)
}

// shown renders a string or number: redacted, cleaned and cut when there
// is a redactor, its type and length when there is none.
func (s *summarizer) shown(v, typ string) string {
	n := utf8.RuneCountInString(v)
	if s.redact == nil {
		return fmt.Sprintf("%s(%d)", typ, n)
	}
	r := clean(s.redact(v))
	if utf8.RuneCountInString(r) > maxShown {
		return fmt.Sprintf("%s(%d chars)", strconv.Quote(cut(r, maxShown)), n)
	}
	if typ == "number" {
		return r
	}
	return strconv.Quote(r)
}

// key is quoted, so that a key cannot pose as text of the prompt.
func (s *summarizer) key(k string) string {
	if s.redact != nil {
		k = s.redact(k)
	}
	return strconv.Quote(cut(clean(k), maxShown))
}

func (s *summarizer) object(depth int) error {
	if err := s.write("{"); err != nil {
		return err
	}
	for i := 0; s.dec.More(); i++ {
		tok, err := s.dec.Token()
		if err != nil {
			return err
		}
		k, _ := tok.(string)
		sep := ", "
		if i == 0 {
			sep = ""
		}
		if err := s.write(sep, s.key(k), ": "); err != nil {
			return err
		}
		if err := s.value(depth + 1); err != nil {
			return err
		}
	}
	if _, err := s.dec.Token(); err != nil {
		return err
	}
	return s.write("}")
}

func (s *summarizer) array(depth int) error {
	if err := s.write("["); err != nil {
		return err
	}
	n := 0
	for ; s.dec.More(); n++ {
		if n >= maxItems {
			if err := s.skipValue(); err != nil {
				return err
			}
			continue
		}
		if n > 0 {
			if err := s.write(", "); err != nil {
				return err
			}
		}
		if err := s.value(depth + 1); err != nil {
			return err
		}
	}
	if _, err := s.dec.Token(); err != nil {
		return err
	}
	if n > maxItems {
		return s.write(fmt.Sprintf(", … (%d items)]", n))
	}
	return s.write("]")
}

// skipped consumes a value nested too deep, opened by d, and writes a
// placeholder for it.
func (s *summarizer) skipped(d json.Delim) error {
	if err := s.skipRest(); err != nil {
		return err
	}
	if d == '{' {
		return s.write("{…}")
	}
	return s.write("[…]")
}

func (s *summarizer) skipValue() error {
	tok, err := s.dec.Token()
	if err != nil {
		return err
	}
	if _, ok := tok.(json.Delim); ok {
		return s.skipRest()
	}
	return nil
}

// skipRest consumes tokens up to the end of the object or array whose
// opening delimiter was just read.
func (s *summarizer) skipRest() error {
	for depth := 1; depth > 0; {
		tok, err := s.dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// clean replaces what a terminal or a one-line display would act on
// (control characters, bidirectional overrides, invalid UTF-8) with '?'.
func clean(s string) string {
	ok := true
	for _, r := range s {
		if r == utf8.RuneError || (r != ' ' && !unicode.IsPrint(r)) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (r != ' ' && !unicode.IsPrint(r)) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// cut shortens s to at most n characters, ending it with "…" if it was cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-1]) + "…"
}
