package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// maxArgDepth bounds the nesting argKeys walks; deeper arguments are
// refused like duplicates.
const maxArgDepth = 64

// argKeys says what is wrong with the keys of raw, a call's arguments, or
// "" if nothing is: an object that repeats a key, or holds two keys equal
// under Unicode case folding ("repoOwner" and "repoowner"), at any depth;
// nesting deeper than maxArgDepth; text that is not JSON. The approver's
// summary, the policy and the server could each read another of two such
// values (Go's encoding/json binds keys case-insensitively, the last
// match winning), so such a call is refused rather than guessed about.
func argKeys(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		obj     bool
		wantKey bool
		keys    map[string]string // folded key → the key as sent
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) != 0 {
				return "are not valid JSON"
			}
			return ""
		}
		if err != nil {
			return "are not valid JSON"
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k, _ := tok.(string)
			f := foldKey(k)
			if prev, ok := top.keys[f]; ok {
				if prev == k {
					return fmt.Sprintf("repeat the key %s", quoteKey(k))
				}
				return fmt.Sprintf("hold the keys %s and %s, which differ only in case", quoteKey(prev), quoteKey(k))
			}
			top.keys[f] = k
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxArgDepth {
				return fmt.Sprintf("nest deeper than %d levels", maxArgDepth)
			}
			if top != nil && top.obj {
				top.wantKey = true
			}
			stack = append(stack, frame{obj: tok == json.Delim('{'), wantKey: true, keys: map[string]string{}})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			if top != nil && top.obj {
				top.wantKey = true
			}
		}
	}
}

// foldKey maps every rune of k to the smallest rune of its Unicode
// simple case folding orbit, so that keys equal under case folding (also
// "K" and the Kelvin sign, "s" and "ſ", which encoding/json matches) map
// to the same string.
func foldKey(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// quoteKey is a key as an error message shows it: quoted, cut.
func quoteKey(k string) string {
	if r := []rune(k); len(r) > 40 {
		k = string(r[:39]) + "…"
	}
	return strconv.Quote(k)
}
