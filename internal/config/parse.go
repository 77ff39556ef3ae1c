package config

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Parse decodes a config from data: YAML syntax, the shape (known keys, no
// duplicates) and the type of every value. filename only labels errors.
// On error the *Config is nil and the error is an Errors.
func Parse(filename string, data []byte) (*Config, error) {
	c, err := parse(filename, data)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// parse is Parse that also returns what did decode when a value had the
// wrong shape (nil when the document itself did not: too large, a
// syntax error), for Load's checks of the rest.
func parse(filename string, data []byte) (*Config, Errors) {
	d := &decoder{collector: collector{file: filename}}
	var c *Config
	if len(data) > MaxFile {
		// Decoding costs many times the text in memory: 35 MB took 1.8 GB.
		d.errorf(Pos{1, 1}, "the config is larger than the %d MiB a config may have", MaxFile>>20)
	} else if root := d.document(data); root != nil {
		c = d.config(root)
	}
	if err := d.err(); err != nil {
		return c, err.(Errors)
	}
	return c, nil
}

// MaxFile bounds a config's size: a config of hundreds of servers is a
// few hundred KiB.
const MaxFile = 4 << 20

// Load parses and validates a config. A config with values of the
// wrong shape is validated too, so that one run names more mistakes;
// what the checks say of a value that did not decode, of a block holding
// one (left empty, it would look missing), or naming such a block or
// its server (a check across blocks: clients and listen, a group's
// members, prefixes) is left out.
func Load(filename string, data []byte) (*Config, error) {
	c, perrs := parse(filename, data)
	if perrs == nil {
		if err := Validate(c); err != nil {
			return nil, err
		}
		return c, nil
	}
	if c == nil {
		return nil, perrs
	}
	err := Validate(c)
	r := &collector{file: filename, errs: perrs}
	for _, v := range AsErrors(err) {
		if !aboutUndecoded(v, perrs) {
			r.errs = append(r.errs, v)
		}
	}
	return nil, r.err()
}

// aboutUndecoded reports whether the check's error v may be about what
// did not decode (perrs): its key path is that of a parse error, below
// one or above one; it names the top-level block or the server of one;
// or either has no key path to compare.
func aboutUndecoded(v *Error, perrs Errors) bool {
	vp, ok := keyPath(v.Msg)
	if !ok {
		return true
	}
	for _, p := range perrs {
		pp, ok := keyPath(p.Msg)
		if !ok || vp == pp || strings.HasPrefix(vp, pp+".") || strings.HasPrefix(vp, pp+"[") ||
			strings.HasPrefix(pp, vp+".") || strings.HasPrefix(pp, vp+"[") {
			return true
		}
		// The block or server of the parse error, named in the check's
		// message after its own key path.
		name, rest, _ := strings.Cut(pp, ".")
		name, _, _ = strings.Cut(name, "[")
		if name == "servers" {
			name, _, _ = strings.Cut(rest, ".")
		}
		if name != "" && regexp.MustCompile(`(^|\W)`+regexp.QuoteMeta(name)+`(\W|$)`).MatchString(v.Msg[len(vp):]) {
			return true
		}
	}
	return false
}

// keyPath is the key path an error message is about: the one it starts
// with (servers.w.limits.memory: ...), or an unknown or duplicate key's
// below the top level (unknown key "memroy" in servers.w.limits).
func keyPath(msg string) (string, bool) {
	for _, pre := range []string{"unknown key ", "duplicate key "} {
		rest, ok := strings.CutPrefix(msg, pre)
		if !ok {
			continue
		}
		key, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", false
		}
		k, _ := strconv.Unquote(key)
		in, ok := strings.CutPrefix(rest[len(key):], " in ")
		if !ok || strings.HasPrefix(in, "the top level") {
			return "", false // a misspelt or repeated top-level block: what follows from it is unknown
		}
		parent, _, _ := strings.Cut(in, " ")
		parent = strings.TrimSuffix(parent, ";")
		return parent + "." + k, true
	}
	path, _, ok := strings.Cut(msg, ": ")
	return path, ok && path != "" && !strings.ContainsAny(path, " \t")
}

type decoder struct {
	collector
	// keyOf is where the key is whose value a node is, for the mappings
	// that errors about a whole block point at (Meta.Pos).
	keyOf map[*yaml.Node]Pos
}

// syntaxLine pulls the line out of yaml's syntax errors; they carry no column.
var syntaxLine = lazyRegexp(`^yaml: line (\d+): (.*)$`)

// document returns the top-level mapping, or nil after reporting why not.
func (d *decoder) document(data []byte) (root *yaml.Node) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := safeDecode(dec, &doc)
	if err == io.EOF {
		d.errorf(Pos{1, 1}, "empty config file (want a mapping starting with version: 1)")
		return nil
	}
	if err != nil {
		d.syntaxError(err, data)
		return nil
	}
	var extra yaml.Node
	switch err := safeDecode(dec, &extra); {
	case err == nil:
		d.errorf(Pos{extra.Line, extra.Column}, "more than one YAML document; want exactly one")
		return nil
	case err != io.EOF:
		d.syntaxError(err, data)
		return nil
	}
	if len(doc.Content) != 1 {
		d.errorf(Pos{1, 1}, "empty config file (want a mapping starting with version: 1)")
		return nil
	}
	root = doc.Content[0]
	switch {
	case isNull(root):
		d.errorf(Pos{1, 1}, "empty config file (want a mapping starting with version: 1)")
	case root.Kind != yaml.MappingNode:
		d.errorf(pos(root), "config must be a mapping, got %s", describe(root))
	default:
		return root
	}
	return nil
}

// safeDecode turns a panic inside the YAML library into an error, so that
// no input can crash the caller.
func safeDecode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: internal error: %v", r)
		}
	}()
	return dec.Decode(n)
}

// syntaxError reports a YAML syntax error in data: where the problem is
// (locateSyntax), or else at the line yaml.v3 gives, column 1.
func (d *decoder) syntaxError(err error, data []byte) {
	if p, msg, ok := locateSyntax(data); ok {
		d.errorf(p, "invalid YAML: %s%s", msg, syntaxHint(data, p, msg))
		return
	}
	p, msg := Pos{1, 1}, err.Error()
	if m := syntaxLine().FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p, msg = Pos{line, 1}, m[2]
	} else if len(msg) > 6 && msg[:6] == "yaml: " {
		msg = msg[6:]
	}
	d.errorf(p, "invalid YAML: %s%s", msg, syntaxHint(data, p, msg))
}

// syntaxHint names the likely cause of a syntax error at p in data when
// the parser's words (msg) do not: a tab in the line's indentation (YAML
// indents with spaces), or a bare * in the line (it starts an alias:
// tools: {allow: [*]} means to quote it).
func syntaxHint(data []byte, p Pos, msg string) string {
	lines := strings.Split(yamlBreaks.Replace(string(data)), "\n")
	if p.Line < 1 || p.Line > len(lines) {
		return ""
	}
	line := lines[p.Line-1]
	indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
	switch {
	case strings.Contains(indent, "\t") && !strings.Contains(msg, "tab"):
		return "; the line is indented with a tab: YAML indents with spaces"
	case strings.Contains(line, "[*") || strings.Contains(line, ", *") || strings.Contains(line, ": *"):
		return `; a bare * starts a YAML alias: quote it ("*")`
	}
	return ""
}

func pos(n *yaml.Node) Pos { return Pos{n.Line, n.Column} }

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names the kind of a node for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	t := n.ShortTag()
	switch {
	case n.Kind == yaml.MappingNode && t == "!!map":
		return "a mapping"
	case n.Kind == yaml.SequenceNode && t == "!!seq":
		return "a list"
	case n.Kind == yaml.AliasNode:
		return "an alias"
	}
	switch t {
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "nothing (null)"
	case "!!timestamp":
		return "a timestamp"
	case "!!binary":
		return "binary data"
	default:
		return fmt.Sprintf("a value tagged %s", t)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// usable reports whether n may be decoded at all: aliases are refused
// because following them would let a small file expand exponentially.
func (d *decoder) usable(n *yaml.Node, path string) bool {
	if n.Kind == yaml.AliasNode {
		d.errorf(pos(n), "%s: aliases (*%s) are not supported", path, n.Value)
		return false
	}
	return true
}

// field decodes the value of one known key.
type field struct {
	key string
	dec func(v *yaml.Node, path string)
}

// pair is one key/value of a mapping whose key passed the checks.
type pair struct {
	key, val *yaml.Node
	name     string
}

// pairs returns the entries of mapping n, reporting bad and duplicate keys.
// A null n is an empty mapping.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	if !d.usable(n, path) || isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode || n.ShortTag() != "!!map" {
		d.errorf(pos(n), "%s: expected a mapping, got %s", path, describe(n))
		return nil
	}
	var out []pair
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name, ok := d.key(k, path)
		if !ok {
			continue
		}
		if first, dup := seen[name]; dup {
			d.errorf(pos(k), "duplicate key %q in %s (first at line %d)", name, where(path), first.Line)
			continue
		}
		seen[name] = k
		out = append(out, pair{key: k, val: v, name: name})
	}
	return out
}

func where(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

func (d *decoder) key(k *yaml.Node, path string) (string, bool) {
	switch {
	case k.Kind == yaml.AliasNode:
		d.errorf(pos(k), "%s: aliases (*%s) are not supported", where(path), k.Value)
	case k.Kind != yaml.ScalarNode:
		d.errorf(pos(k), "%s: keys must be plain strings, got %s", where(path), describe(k))
	case k.ShortTag() == "!!merge":
		d.errorf(pos(k), "%s: merge keys (<<) are not supported", where(path))
	case isNull(k):
		d.errorf(pos(k), "%s: empty key", where(path))
	case !utf8.ValidString(k.Value):
		d.errorf(pos(k), "%s: key is not valid UTF-8", where(path))
	default:
		return k.Value, true
	}
	return "", false
}

// mapping decodes mapping n with the known keys in fields, recording
// positions in m. Unknown keys are errors.
func (d *decoder) mapping(n *yaml.Node, path string, m *Meta, fields []field) {
	m.Pos = pos(n)
	if p, ok := d.keyOf[n]; ok {
		m.Pos = p
	}
	for _, kv := range d.pairs(n, path) {
		f, ok := findField(fields, kv.name)
		if !ok {
			d.unknownKey(kv, path, fields)
			continue
		}
		m.set(kv.name, valuePos(kv))
		if d.keyOf == nil {
			d.keyOf = make(map[*yaml.Node]Pos)
		}
		d.keyOf[kv.val] = valuePos(kv)
		f.dec(kv.val, join(path, kv.name))
	}
}

// valuePos is where an error about kv's value points: a scalar or a flow
// collection ({...}, [...]) where it is written; a block mapping or list,
// or nothing, at its key: the line that names the block, not the first
// line inside it.
func valuePos(kv pair) Pos {
	v := kv.val
	switch {
	case v.Kind == yaml.AliasNode, v.Kind == yaml.ScalarNode && !isNull(v):
		return pos(v)
	case (v.Kind == yaml.MappingNode || v.Kind == yaml.SequenceNode) && v.Style&yaml.FlowStyle != 0:
		return pos(v)
	}
	return pos(kv.key)
}

func findField(fields []field, key string) (field, bool) {
	for _, f := range fields {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}

func (d *decoder) unknownKey(kv pair, path string, fields []field) {
	msg := fmt.Sprintf("unknown key %q in %s", kv.name, path)
	if path == "" {
		msg = fmt.Sprintf("unknown top-level key %q", kv.name)
		if kv.name == "mcpServers" {
			msg += "; this is an MCP client's config (Claude Desktop, Cursor): mcpbox import FILE turns it into an mcpbox config"
		}
	}
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	if best := Closest(kv.name, keys); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	d.errorf(pos(kv.key), "%s", msg)
}

// Closest is the candidate nearest to name, within an edit distance of 1
// for a name of 2 to 5 bytes and 2 for a longer one; "" if there is
// none. It is the "did you mean" of an unknown key, and of the command
// line's unknown commands and flags. A short name two edits away from a
// candidate is as near to many others: "bogus" is not a typo of "logs".
func Closest(name string, candidates []string) string {
	limit := 1
	if len(name) > 5 {
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, c := range candidates {
		if dist := editDistance(name, c); dist < bestDist && dist < len(name) {
			best, bestDist = c, dist
		}
	}
	return best
}

// editDistance is the number of edits (a byte inserted, deleted or
// replaced, or two neighbours swapped) between a and b: the optimal
// string alignment distance, so that "sevre" is one edit from "serve".
func editDistance(a, b string) int {
	// Three rows of the table: i-2, i-1 and i.
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// list calls each for every element of list n and reports whether n is a
// list. Null is not an empty list: "require:" left blank must not silently
// mean "require nothing".
func (d *decoder) list(n *yaml.Node, path string, each func(i int, el *yaml.Node, path string)) bool {
	if !d.usable(n, path) {
		return false
	}
	if n.Kind != yaml.SequenceNode || n.ShortTag() != "!!seq" {
		hint := ""
		switch {
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && strings.HasSuffix(path, ".command"):
			// A command line as one string. Its words are not repeated:
			// one may be a pasted credential (--token=...).
			hint = "; write it as a list, one element per argument: [PROGRAM, ARG, ...]"
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && strings.HasSuffix(path, ".args"):
			hint = "; write it as a list, one element per argument: [ARG, ...] (the program is command:, or the package's own)"
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && slices.Contains([]string{".allow", ".deny", ".approve"}, path[max(strings.LastIndex(path, "."), 0):]):
			hint = fmt.Sprintf("; write it as a list of tool names or globs: [%s]", strconv.Quote(n.Value))
		}
		d.errorf(pos(n), "%s: expected a list, got %s%s", path, describe(n), hint)
		return false
	}
	for i, el := range n.Content {
		each(i, el, fmt.Sprintf("%s[%d]", path, i))
	}
	return true
}

// strs decodes a list of strings, recording element positions as key[i] in m.
func (d *decoder) strs(n *yaml.Node, path string, m *Meta, key string, conv func(*yaml.Node, string) string) []string {
	out := []string{}
	d.list(n, path, func(i int, el *yaml.Node, p string) {
		m.set(elemKey(key, i), pos(el))
		out = append(out, conv(el, p))
	})
	return out
}

// scalar reports whether n is a scalar with one of tags, else reports that
// path expected what.
func (d *decoder) scalar(n *yaml.Node, path, what string, tags ...string) bool {
	if !d.usable(n, path) {
		return false
	}
	if n.Kind == yaml.ScalarNode {
		t := n.ShortTag()
		for _, want := range tags {
			if t == want {
				return true
			}
		}
	}
	d.errorf(pos(n), "%s: expected %s, got %s", path, what, describe(n))
	return false
}

func (d *decoder) str(n *yaml.Node, path string) string {
	if !d.scalar(n, path, "a string", "!!str") {
		return ""
	}
	return d.utf8(n, path)
}

// text accepts any non-null scalar as written, for values such as command
// arguments and env values where "8080" and 8080 mean the same.
func (d *decoder) text(n *yaml.Node, path string) string {
	if !d.scalar(n, path, "a string", "!!str", "!!int", "!!float", "!!bool", "!!timestamp") {
		return ""
	}
	return d.utf8(n, path)
}

func (d *decoder) utf8(n *yaml.Node, path string) string {
	if !utf8.ValidString(n.Value) {
		d.errorf(pos(n), "%s: not valid UTF-8", path)
		return ""
	}
	return n.Value
}

func (d *decoder) integer(n *yaml.Node, path string) int {
	var v int
	if !d.scalar(n, path, "an integer", "!!int") {
		return 0
	}
	if err := n.Decode(&v); err != nil {
		d.errorf(pos(n), "%s: integer %s out of range", path, n.Value)
	}
	return v
}

func (d *decoder) float(n *yaml.Node, path string) float64 {
	var v float64
	if !d.scalar(n, path, "a number", "!!int", "!!float") {
		return 0
	}
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.errorf(pos(n), "%s: expected a finite number, got %s", path, n.Value)
		return 0
	}
	return v
}

func (d *decoder) boolean(n *yaml.Node, path string) bool {
	var v bool
	if d.scalar(n, path, "true or false", "!!bool") {
		if err := n.Decode(&v); err != nil {
			d.errorf(pos(n), "%s: expected true or false", path)
		}
	}
	return v
}

func (d *decoder) size(n *yaml.Node, path string) Size {
	if !d.scalar(n, path, "a size such as 512Mi", "!!str", "!!int", "!!float") {
		return 0
	}
	s, err := ParseSize(n.Value)
	if err != nil {
		d.errorf(pos(n), "%s: %v", path, err)
	}
	return s
}

func (d *decoder) duration(n *yaml.Node, path string) Duration {
	if !d.scalar(n, path, "a duration such as 10m", "!!str", "!!int") {
		return 0
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		d.errorf(pos(n), "%s: %v", path, err)
	}
	return v
}
