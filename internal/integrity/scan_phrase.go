package integrity

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A phrase is a pattern over the words of normalized text. Its source is
// space-separated elements:
//
//	a|b|c     one of the words (a+b is the two words "a b")
//	[a|b]     optionally one of them
//	*N        up to N arbitrary words
//	$T        the name of another exposed tool
//
// Matching tries every element at every word, so the work is the number of
// words times a small constant bounded by the pattern: no regular
// expressions, no backtracking beyond one pattern.
type phrase struct {
	rule    string
	sev     string
	defOnly bool // not applied to tool results
	// notAfter are words that, right before a match, make it prose
	// about the phrase rather than the phrase (see notAfter).
	notAfter []string
	src      string
	elems    []elem
}

type elem struct {
	alts [][]string
	opt  bool
	gap  int
	tool bool
}

// parsePhrase panics on a malformed pattern: patterns are constants,
// checked by the tests.
func parsePhrase(rule, sev, src string) phrase {
	p := phrase{rule: rule, sev: sev, src: src}
	for _, f := range strings.Fields(src) {
		var e elem
		switch {
		case f == "$T":
			e.tool = true
		case f[0] == '*':
			n, err := strconv.Atoi(f[1:])
			if err != nil || n < 1 || n > 8 {
				panic("integrity: bad gap in phrase " + src)
			}
			e.gap = n
		default:
			if f[0] == '[' {
				if f[len(f)-1] != ']' {
					panic("integrity: unclosed [ in phrase " + src)
				}
				e.opt, f = true, f[1:len(f)-1]
			}
			for _, a := range strings.Split(f, "|") {
				e.alts = append(e.alts, strings.Split(a, "+"))
			}
		}
		p.elems = append(p.elems, e)
	}
	if len(p.elems) == 0 || p.elems[0].opt || p.elems[0].gap > 0 {
		panic("integrity: phrase must start with a required word or $T: " + src)
	}
	return p
}

// phraseSet indexes phrases by their first words.
type phraseSet struct {
	byWord map[string][]*phrase
	byTool []*phrase
}

func newPhraseSet(ps []phrase) *phraseSet {
	set := &phraseSet{byWord: map[string][]*phrase{}}
	for i := range ps {
		p := &ps[i]
		if p.elems[0].tool {
			set.byTool = append(set.byTool, p)
			continue
		}
		for _, a := range p.elems[0].alts {
			set.byWord[a[0]] = append(set.byWord[a[0]], p)
		}
	}
	return set
}

// word is one word of normalized text: n.s[start:end].
type word struct{ start, end int }

// words splits normalized text into words: letters, digits, '_', and '-'
// or an apostrophe inside a word.
func words(s string) (ws []word, text []string) {
	ws = make([]word, 0, len(s)/6+1)
	text = make([]string, 0, len(s)/6+1)
	start := -1
	for i := 0; i <= len(s); {
		r, size := rune(0), 1
		if i < len(s) {
			if r = rune(s[i]); r >= utf8.RuneSelf {
				r, size = utf8.DecodeRuneInString(s[i:])
			}
		}
		in := r == '_' || r == '-' || r == '\'' || r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9') ||
			r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r))
		if i < len(s) && in {
			if start < 0 {
				start = i
			}
		} else if start >= 0 {
			a, b := start, i
			for a < b && (s[a] == '-' || s[a] == '\'') {
				a++
			}
			for b > a && (s[b-1] == '-' || s[b-1] == '\'') {
				b--
			}
			if a < b {
				ws = append(ws, word{a, b})
				text = append(text, s[a:b])
			}
			start = -1
		}
		i += size
	}
	return ws, text
}

// match reports the end of a match of elems at word i, or -1.
func (m *matcher) match(i int, elems []elem) int {
	if len(elems) == 0 {
		return i
	}
	e := elems[0]
	switch {
	case e.gap > 0:
		for k := 0; k <= e.gap && i+k <= len(m.text); k++ {
			if end := m.match(i+k, elems[1:]); end >= 0 {
				return end
			}
		}
		return -1
	case e.tool:
		for _, n := range m.tools.at(m, i) {
			if end := m.match(i+n, elems[1:]); end >= 0 {
				return end
			}
		}
		return -1
	}
	for _, alt := range e.alts {
		if m.hasWords(i, alt) {
			if end := m.match(i+len(alt), elems[1:]); end >= 0 {
				return end
			}
		}
	}
	if e.opt {
		return m.match(i, elems[1:])
	}
	return -1
}

func (m *matcher) hasWords(i int, ws []string) bool {
	if i+len(ws) > len(m.text) {
		return false
	}
	for k, w := range ws {
		if m.text[i+k] != w {
			return false
		}
	}
	return true
}

// matcher holds one normalized text split into words.
type matcher struct {
	n     normText
	ws    []word
	text  []string
	tools *toolIndex
}

// phraseHit is one match: the phrase and its word range.
type phraseHit struct {
	p          *phrase
	start, end int // words
}

// run calls hit for every match of set, leftmost first.
func (m *matcher) run(set *phraseSet, hit func(phraseHit)) {
	for i, w := range m.text {
		for _, p := range set.byWord[w] {
			if i > 0 && slices.Contains(p.notAfter, m.text[i-1]) {
				continue
			}
			if end := m.match(i, p.elems); end > i {
				hit(phraseHit{p, i, end})
			}
		}
		if len(set.byTool) > 0 && len(m.tools.at(m, i)) > 0 {
			for _, p := range set.byTool {
				if end := m.match(i, p.elems); end > i {
					hit(phraseHit{p, i, end})
				}
			}
		}
	}
}

// bytes returns the normalized byte range of words [i, j).
func (m *matcher) bytes(i, j int) (int, int) {
	return m.ws[i].start, m.ws[j-1].end
}

// toolIndex finds the names of the other exposed tools in text, for the
// tool-shadowing phrases.
type toolIndex struct {
	first map[string][][]string // first word -> names, as words
	// compound holds one-word names with '_' or '-': they also match as
	// the tail of a longer word ("mcp_tool_send_email" names send_email).
	compound map[string]bool
}

// minToolName: shorter names ("ls", "do") are ordinary words too often.
const minToolName = 3

func newToolIndex(others []string) *toolIndex {
	t := &toolIndex{first: map[string][][]string{}, compound: map[string]bool{}}
	for _, name := range others {
		if len(name) < minToolName {
			continue
		}
		_, ws := words(normalize(name, false).s)
		if len(ws) == 0 {
			continue
		}
		t.first[ws[0]] = append(t.first[ws[0]], ws)
		if len(ws) == 1 && strings.ContainsAny(ws[0], "_-") {
			t.compound[ws[0]] = true
		}
	}
	return t
}

// at returns the lengths, in words, of the tool names starting at word i.
// A name that is a plain word ("search", "fetch") counts only when the
// text marks it as a name: quoted, or followed by "tool".
func (t *toolIndex) at(m *matcher, i int) []int {
	if len(t.first) == 0 || i >= len(m.text) {
		return nil
	}
	w := m.text[i]
	var out []int
	for _, name := range t.first[w] {
		if !m.hasWords(i, name) {
			continue
		}
		if len(name) == 1 && plainWord(w) && !m.markedName(i) {
			continue
		}
		out = append(out, len(name))
	}
	if len(out) == 0 && len(t.compound) > 0 {
		for k := 0; k < len(w); k++ {
			if (w[k] == '_' || w[k] == '-') && t.compound[strings.TrimLeft(w[k:], "_-")] {
				return []int{1}
			}
		}
	}
	return out
}

func plainWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// markedName reports whether word i is quoted or followed by "tool".
func (m *matcher) markedName(i int) bool {
	if i+1 < len(m.text) && (m.text[i+1] == "tool" || m.text[i+1] == "function") {
		return true
	}
	w, s := m.ws[i], m.n.s
	return w.start > 0 && w.end < len(s) && strings.IndexByte("`'\"", s[w.start-1]) >= 0 && s[w.end] == s[w.start-1]
}
