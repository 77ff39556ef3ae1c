package integrity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Kinds of pinned definitions, as they appear in [Change.Kind] and in
// kind-qualified [Pins.Trust] keys.
const (
	KindTool     = "tool"
	KindPrompt   = "prompt"
	KindTemplate = "template"
	// KindInstructions is the instructions text a server sends at
	// initialization, which clients put before the model like a
	// description. Its one item, InstructionsKey, is the object
	// {"instructions": TEXT, "name": "instructions"}; a server without
	// instructions has none, so text appearing later is new, like a tool.
	KindInstructions = "instructions"
)

// InstructionsKey is the key of a server's instructions item.
const InstructionsKey = "instructions"

// MaxDefinitionSize bounds the raw JSON of one definition. A description
// longer than this is not something a human reviews; refusing it also
// bounds the work a server can make the gateway do per list.
const MaxDefinitionSize = 1 << 20

// maxNesting bounds nesting so a hostile schema cannot exhaust the stack of
// the recursive strictParser.
const maxNesting = 512

// unpinnedFields are the members of a definition that may change without
// a re-approval: they are the client's business, not the model's (_meta,
// icons, execution hints). Every other member is pinned, known or not: a
// client may read a member mcpbox does not know (some SDKs match member
// names case-insensitively, so "Description" can stand in for
// "description"), and what is not pinned could change unseen.
var unpinnedFields = map[string]bool{"_meta": true, "icons": true, "execution": true}

// kinds are the definition kinds that can be pinned.
var kinds = map[string]bool{KindTool: true, KindPrompt: true, KindTemplate: true, KindInstructions: true}

// pinKeyField names the member whose value is the item's key in the lock.
var pinKeyField = map[string]string{
	KindTool:         "name",
	KindPrompt:       "name",
	KindTemplate:     "uriTemplate",
	KindInstructions: "name",
}

// Canonical returns the RFC 8785 (JCS) canonical JSON of the pinned
// members of def (all but _meta, icons and execution), a server's list
// entry of the given kind. A member whose
// value is null is treated as absent: the model sees no difference.
// Duplicate keys, numbers outside float64 range, invalid UTF-8, lone
// surrogates and definitions over [MaxDefinitionSize] are errors.
func Canonical(kind string, def json.RawMessage) ([]byte, error) {
	c, _, err := canonicalize(kind, def)
	return c, err
}

// canonicalize returns Canonical and the definition's key member (name,
// or uriTemplate for templates; "" when missing or not a string).
func canonicalize(kind string, def []byte) ([]byte, string, error) {
	sel, err := selectFields(kind, def)
	if err != nil {
		return nil, "", err
	}
	key, _ := sel[pinKeyField[kind]].(string)
	return appendValue(nil, sel), key, nil
}

// Hash returns "sha256:" and the hex sha256 of [Canonical].
func Hash(kind string, def json.RawMessage) (string, error) {
	c, err := Canonical(kind, def)
	if err != nil {
		return "", err
	}
	return hashCanonical(c), nil
}

func hashCanonical(c []byte) string {
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// selectFields parses def and keeps its pinned members.
func selectFields(kind string, def []byte) (map[string]any, error) {
	if !kinds[kind] {
		return nil, fmt.Errorf("canonicalizing: %w %q", ErrUnknownKind, kind)
	}
	if len(def) > MaxDefinitionSize {
		return nil, fmt.Errorf("canonicalizing %s: %w (%d bytes)", kind, ErrTooLarge, len(def))
	}
	v, err := parseStrict(def)
	if err != nil {
		return nil, fmt.Errorf("canonicalizing %s: %w", kind, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("canonicalizing %s: %w", kind, ErrNotObject)
	}
	sel := make(map[string]any, len(obj))
	for f, x := range obj {
		if !unpinnedFields[f] && x != nil {
			sel[f] = x
		}
	}
	return sel, nil
}

// appendValue writes v, a value from parseStrict, in JCS form.
func appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case float64:
		return appendNumber(b, v)
	case string:
		return appendString(b, v)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e)
		}
		return append(b, ']')
	case map[string]any:
		return appendObject(b, v)
	}
	panic(fmt.Sprintf("integrity: unexpected JSON value %T", v))
}

// appendObject writes members sorted by their UTF-16 code units, as
// RFC 8785 section 3.2.3 requires (not by UTF-8 bytes or code points: the
// two differ for characters beyond U+FFFF against U+E000..U+FFFF).
func appendObject(b []byte, m map[string]any) []byte {
	type member struct {
		key   string
		units []uint16
	}
	members := make([]member, 0, len(m))
	for k := range m {
		members = append(members, member{k, utf16.Encode([]rune(k))})
	}
	slices.SortFunc(members, func(x, y member) int { return slices.Compare(x.units, y.units) })
	b = append(b, '{')
	for i, mb := range members {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, mb.key)
		b = append(b, ':')
		b = appendValue(b, m[mb.key])
	}
	return append(b, '}')
}

// appendString escapes as ECMAScript JSON.stringify does: the two-letter
// escapes, other control characters as lowercase \u00xx, all else literal.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch r {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if r < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
				continue
			}
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// appendNumber formats f as ECMAScript Number.prototype.toString does
// (ECMA-262 Number::toString), which RFC 8785 section 3.2.2.3 adopts. Go's
// shortest round-trip digits are the digits ECMAScript picks; only the
// placement of the decimal point and exponent differs.
func appendNumber(b []byte, f float64) []byte {
	if f == 0 { // also -0, which JCS writes as 0
		return append(b, '0')
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d[.ddd]e±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, n := len(digits), x+1 // n: position of the decimal point
	switch {
	case k <= n && n <= 21:
		b = append(b, digits...)
		return append(b, strings.Repeat("0", n-k)...)
	case 0 < n && n <= 21:
		b = append(b, digits[:n]...)
		b = append(b, '.')
		return append(b, digits[n:]...)
	case -6 < n && n <= 0:
		b = append(b, "0."...)
		b = append(b, strings.Repeat("0", -n)...)
		return append(b, digits...)
	}
	b = append(b, digits[0])
	if k > 1 {
		b = append(b, '.')
		b = append(b, digits[1:]...)
	}
	b = append(b, 'e')
	if n-1 >= 0 {
		b = append(b, '+')
	}
	return strconv.AppendInt(b, int64(n-1), 10)
}
