package audit

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
)

// Shape limits: deeper values and keys past the limit are summarised, never
// copied.
const (
	shapeDepth   = 4
	shapeMaxKeys = 64
)

// Shape describes the structure of a JSON argument object without any of
// its values: objects keep their keys (sorted, at most 64, "…" counting the
// rest), strings become {"string":LEN} (length in bytes), arrays
// {"array":LEN,"of":SHAPE-of-first-element}, numbers "number", booleans
// "bool", null "null". Below depth 4 a container is only "object" or
// {"array":LEN}. Input that is not JSON gives {"invalid":LEN}.
//
// Keys are copied: they are names chosen by the tool's schema, not values.
// A client that puts a secret into a key name defeats this; Options.Redact
// still applies to the shape.
func Shape(args json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return nil
	}
	if !json.Valid(args) {
		return invalidShape(len(args))
	}
	if n := Values(args); n > MaxValues {
		// Not decoded: a value for each would cost tens of times the
		// request's size (the guard refuses such a call).
		return json.RawMessage(`{"values":` + strconv.Itoa(n) + `}`)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return invalidShape(len(args))
	}
	out, err := json.Marshal(shapeOf(v, 0))
	if err != nil {
		return invalidShape(len(args))
	}
	return out
}

// MaxValues is the most JSON values a call's arguments may hold, at every
// depth together, as Values counts them (a batch of 10,000 rows of 10
// fields fits): each costs the gateway far more than its bytes (maps,
// policy values, the shape), and a few calls of 300,000 keys at once took
// gigabytes.
const MaxValues = 250_000

// Values counts the containers, members and elements in raw JSON (each
// '{', '[', ':' and ',' outside strings) without decoding it: about the
// number of values a decode would make, never fewer.
func Values(raw []byte) int {
	n, inString, escaped := 0, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == '{' || c == '[' || c == ':' || c == ','):
			n++
		}
	}
	return n
}

func invalidShape(n int) json.RawMessage {
	return json.RawMessage(`{"invalid":` + strconv.Itoa(n) + `}`)
}

func shapeOf(v any, depth int) any {
	switch v := v.(type) {
	case map[string]any:
		if depth >= shapeDepth {
			return "object"
		}
		return objectShape(v, depth)
	case []any:
		if depth >= shapeDepth || len(v) == 0 {
			return map[string]int{"array": len(v)}
		}
		return struct {
			Array int `json:"array"`
			Of    any `json:"of"`
		}{len(v), shapeOf(v[0], depth+1)}
	case string:
		return map[string]int{"string": len(v)}
	case json.Number:
		return "number"
	case bool:
		return "bool"
	default:
		return "null"
	}
}

func objectShape(m map[string]any, depth int) map[string]any {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]any, min(len(keys), shapeMaxKeys)+1)
	for i, k := range keys {
		if i == shapeMaxKeys {
			out["…"] = map[string]int{"more_keys": len(keys) - shapeMaxKeys}
			break
		}
		out[k] = shapeOf(m[k], depth+1)
	}
	return out
}
