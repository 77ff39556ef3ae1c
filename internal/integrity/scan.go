package integrity

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Finding is one rule hit.
type Finding struct {
	Rule     string // rule id, e.g. "hidden-tag"
	Severity string // "high", "medium" or "low"
	// Where is the JSON path inside the definition or result, e.g.
	// "description" or "inputSchema.properties.path.description"; array
	// elements are written "arguments[0]", and "$" is the whole document.
	// Keys are escaped as Excerpt is.
	Where string
	// Excerpt is at most MaxExcerptBytes of the text around the hit, with
	// invisible and control characters shown as \u{XXXX}.
	Excerpt string
	Message string // one line: what was found
}

// String renders f on one line, for logs and test failures.
func (f Finding) String() string {
	return fmt.Sprintf("%s [%s] at %s: %s (excerpt %q)", f.Rule, f.Severity, f.Where, f.Message, f.Excerpt)
}

// Rule describes one scanner rule; docs/integrity.md explains each.
type Rule struct{ ID, Severity, Summary, Rationale string }

// Rule ids.
const (
	RuleHiddenTag        = "hidden-tag"
	RuleModelDirective   = "model-directive"
	RuleSecrecy          = "secrecy"
	RuleCredentialAccess = "credential-access"
	RuleToolShadowing    = "tool-shadowing"
	RuleInvisibleUnicode = "invisible-unicode"
	RuleDeceptiveUnicode = "deceptive-unicode"
	RuleEncodedBlob      = "encoded-blob"
	RuleAbnormalLength   = "abnormal-length"
)

// Severities, from most to least alarming.
const (
	SeverityHigh   = "high"
	SeverityMedium = "medium"
	SeverityLow    = "low"
)

// Scanner thresholds.
const (
	// LongDescriptionBytes: a description longer than this is more than a
	// human reviews before approving a server.
	LongDescriptionBytes = 4096
	// LongDefinitionBytes: a definition (raw JSON) longer than this is
	// abnormal even with a large schema.
	LongDefinitionBytes = 64 << 10
	// MaxExcerptBytes bounds Finding.Excerpt, in bytes (so also in runes).
	MaxExcerptBytes = 120
	// MinBase64Run, MinHexRun and MinPercentEscapes are the shortest runs
	// of base64 characters, hex digits and %XX escapes encoded-blob reports.
	MinBase64Run      = 80
	MinHexRun         = 64
	MinPercentEscapes = 12
)

// Rules returns every rule in documented order.
func Rules() []Rule {
	return slices.Clone(ruleTable)
}

var ruleTable = []Rule{
	{RuleHiddenTag, SeverityHigh, "tag-like markup aimed at the model (<IMPORTANT>, <SYSTEM>, [INST], <|im_start|>, HTML comments)",
		"Invariant Labs' tool-poisoning attack hides its orders in an <IMPORTANT> block; chat-template tokens try to open a fake system turn."},
	{RuleModelDirective, SeverityHigh, "imperatives addressed to the assistant: \"ignore previous instructions\", \"before using this tool, read ...\", \"as an AI\"",
		"A description documents a tool for the model; orders that override the user or prepend hidden steps are prompt injection."},
	{RuleSecrecy, SeverityHigh, "asks to keep something from the user: \"do not tell the user\", \"without telling the user\", \"keep this secret\"",
		"Honest tools have nothing to hide from the user; Invariant Labs' payload says \"Do not mention this to the user\"."},
	{RuleCredentialAccess, SeverityHigh, "names secret files (~/.ssh, id_rsa, .env, mcp.json, .aws/credentials, ...) or asks to read/send keys, tokens, passwords",
		"The poisoned add tool of Invariant Labs has the model read ~/.cursor/mcp.json and ~/.ssh/id_rsa and pass them as an argument."},
	{RuleToolShadowing, SeverityHigh, "mentions another exposed tool together with orders that change how that tool is used",
		"Invariant Labs' shadowing attack makes one server's description redirect every email sent with another server's send_email tool."},
	{RuleInvisibleUnicode, SeverityHigh, "tag characters (U+E0000-E007F), zero-width, bidi and other format or control characters",
		"Tag characters smuggle ASCII the user cannot see but the model reads (ASCII smuggling); bidi controls reorder text (Trojan Source, CVE-2021-42574)."},
	{RuleDeceptiveUnicode, SeverityHigh, "tool, argument or property names mixing scripts (Latin with Cyrillic or Greek) or using fullwidth or mathematical letters",
		"A homoglyph name looks like a trusted tool or field to the user while being a different string (IDN homograph attacks, Unicode TR39)."},
	{RuleEncodedBlob, SeverityMedium, "long base64 (>= 80 chars), hex (>= 64), data: URIs or percent-encoded runs in text",
		"Models decode base64 and follow what it says; encoding hides instructions from a human reviewer and from text filters."},
	{RuleAbnormalLength, SeverityLow, "a description over LongDescriptionBytes (4096) or a definition over LongDefinitionBytes (64 KiB)",
		"Clients show the first lines of a description; instructions buried far below are read by the model and skipped by people."},
}

func ruleSeverity(id string) string {
	for _, r := range ruleTable {
		if r.ID == id {
			return r.Severity
		}
	}
	return SeverityHigh
}

// ScanDefinition scans one definition of kind "tool", "prompt" or
// "template". others are the names of every other tool the gateway exposes
// (with and without prefix), for tool-shadowing. Every kind is scanned the
// same way (the paths tell names from prose), so an unknown kind is
// scanned too. A definition that is not JSON is scanned as one string at
// "$".
func ScanDefinition(kind string, def json.RawMessage, others []string) []Finding {
	s := newScanner(false, others)
	if len(def) > LongDefinitionBytes {
		s.add(RuleAbnormalLength, "$", string(def[:min(len(def), 200)]), 0, 0,
			fmt.Sprintf("definition is %d bytes, over LongDefinitionBytes (%d)", len(def), LongDefinitionBytes))
	}
	s.document(def)
	return s.findings
}

// ScanResult scans a tools/call result (raw JSON) for content aimed at the
// model: hidden-tag, model-directive, secrecy and invisible-unicode.
// Credential paths, encodings and length are normal in results and not
// reported.
func ScanResult(result json.RawMessage) []Finding {
	s := newScanner(true, nil)
	s.document(result)
	return s.findings
}

// scanner collects the findings for one document.
type scanner struct {
	result   bool
	tools    *toolIndex
	findings []Finding
	seen     map[string]int // rule+"\x00"+where -> index in findings
}

func newScanner(result bool, others []string) *scanner {
	return &scanner{result: result, tools: newToolIndex(others), seen: map[string]int{}}
}

// document decodes doc and scans every string and key in it.
func (s *scanner) document(doc json.RawMessage) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		s.text(scanField{where: "$", text: string(doc), kind: proseField})
		return
	}
	s.walk(v, "", proseField)
}

// fieldKind says which rules apply to a string.
type fieldKind int

const (
	proseField fieldKind = iota // descriptions, titles, anything free-form
	valueField                  // default, examples, enum, const: data, not prose
	nameField                   // tool, prompt, argument and property names
	keyField                    // other object keys
)

type scanField struct {
	where string
	text  string
	kind  fieldKind
	desc  bool // the value of a "description" key
}

func (s *scanner) walk(v any, path string, kind fieldKind) {
	switch v := v.(type) {
	case string:
		isName := kind == proseField && (path == "name" || strings.HasPrefix(path, "arguments[") && strings.HasSuffix(path, "].name"))
		f := scanField{where: path, text: v, kind: kind, desc: lastKey(path) == "description"}
		if isName && !s.result {
			f.kind = nameField
		}
		s.text(f)
	case []any:
		for i, e := range v {
			s.walk(e, path+"["+strconv.Itoa(i)+"]", kind)
		}
	case map[string]any:
		props := lastKey(path) == "properties" || lastKey(path) == "patternProperties"
		for _, k := range slices.Sorted(maps.Keys(v)) {
			p := joinPath(path, k)
			kk := keyField
			if props && !s.result {
				kk = nameField
			}
			s.text(scanField{where: p, text: k, kind: kk})
			ck := kind
			if kind == proseField && valueSlots[k] && !s.result {
				ck = valueField
			}
			s.walk(v[k], p, ck)
		}
	}
}

// valueSlots are the JSON Schema keywords whose values are data.
var valueSlots = map[string]bool{"default": true, "examples": true, "enum": true, "const": true}

// lastKey returns the last object key of path ("" after an array index).
func lastKey(path string) string {
	return path[strings.LastIndexByte(path, '.')+1:]
}

func joinPath(path, key string) string {
	key = escapeText(key, 64)
	if path == "" {
		return key
	}
	return path + "." + key
}

// text runs every applicable rule on one string.
func (s *scanner) text(f scanField) {
	if f.text == "" {
		return
	}
	s.invisible(f)
	n := normalize(f.text, false)
	s.hiddenTags(f, n)
	if f.kind == nameField || f.kind == keyField {
		// Identifiers carry phrases as snake_case or kebab-case.
		s.phrases(f, normalize(f.text, true))
	} else {
		s.phrases(f, n)
	}
	if s.result {
		return
	}
	s.credentialPaths(f, n)
	if f.kind == nameField {
		s.deceptive(f)
	}
	if f.kind != keyField && f.kind != nameField {
		s.blobs(f)
	}
	if f.desc && len(f.text) > LongDescriptionBytes {
		s.add(RuleAbnormalLength, f.where, f.text, 0, 0,
			fmt.Sprintf("description is %d bytes, over LongDescriptionBytes (%d)", len(f.text), LongDescriptionBytes))
	}
}

// add records a hit of rule at where; text[start:end] is the hit. Further
// hits of the same rule at the same place only count, so one hostile
// megabyte does not make a megabyte of findings.
func (s *scanner) add(rule, where, text string, start, end int, msg string) {
	s.addSev(rule, ruleSeverity(rule), where, text, start, end, msg)
}

func (s *scanner) addSev(rule, sev, where, text string, start, end int, msg string) {
	if s.known(rule, sev, where) {
		return
	}
	s.seen[rule+"\x00"+where] = len(s.findings)
	s.findings = append(s.findings, Finding{
		Rule: rule, Severity: sev, Where: where,
		Excerpt: excerpt(text, start, end),
		Message: oneLine(msg, 300),
	})
}

func severityRank(s string) int {
	switch s {
	case SeverityHigh:
		return 3
	case SeverityMedium:
		return 2
	}
	return 1
}

// known reports whether rule already hit at where, raising that finding's
// severity to sev if higher. Callers check it before building a message.
func (s *scanner) known(rule, sev, where string) bool {
	i, ok := s.seen[rule+"\x00"+where]
	if !ok {
		return false
	}
	if f := &s.findings[i]; severityRank(sev) > severityRank(f.Severity) {
		f.Severity = sev
	}
	return true
}
