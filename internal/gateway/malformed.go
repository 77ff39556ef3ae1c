package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// sdkMaxDepth is the deepest nesting the go-sdk's JSON-RPC decoder
// accepts; a deeper message fails to decode.
const sdkMaxDepth = 1000

// topLevel is what a tolerant walk finds at the top level of a line that
// failed to decode as JSON-RPC.
type topLevel struct {
	object   bool   // the line starts with '{'
	id       []byte // the raw value of the "id" member; nil when absent
	method   bool   // it has a "method" member: a request or notification
	response bool   // it has a "result" or "error" member
	control  bool   // a raw control character inside a string
	depth    int    // the deepest nesting of objects and arrays
}

// scanTop walks the top-level members of a JSON object without decoding
// their values: it tolerates raw control characters and any nesting depth
// (no recursion), and stops at the first thing it cannot read.
func scanTop(line []byte) topLevel {
	var t topLevel
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return t
	}
	t.object, t.depth = true, 1
	for i++; i < len(line); {
		i = skipSpace(line, i)
		if i >= len(line) || line[i] == '}' {
			return t
		}
		if line[i] == ',' {
			i++
			continue
		}
		if line[i] != '"' {
			return t
		}
		start := i
		i = t.skipString(line, i)
		key := line[start:i]
		if i = skipSpace(line, i); i >= len(line) || line[i] != ':' {
			return t
		}
		i = skipSpace(line, i+1)
		start = i
		i = t.skipValue(line, i)
		// The member's name as a decoder reads it ("\u0069d" is "id"),
		// and of two "id" members the last, as the decoder keeps.
		name := string(key)
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(key, &s) == nil {
				name = strconv.Quote(s)
			}
		}
		switch name {
		case `"id"`:
			t.id = bytes.TrimSpace(line[start:i])
		case `"method"`:
			t.method = true
		case `"result"`, `"error"`:
			t.response = true
		}
	}
	return t
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i].
func (t *topLevel) skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\':
			i++
		case c == '"':
			return i + 1
		case c < 0x20:
			t.control = true
		}
	}
	return i
}

// skipValue returns the index after the value that starts at b[i]: a
// string, a nested object or array, or a scalar up to the next ',' or '}'.
func (t *topLevel) skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = t.skipString(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
			t.depth = max(t.depth, depth+1)
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// malformedResponse turns a line that looks like a response but does not
// decode into an error response, so that the call waiting for it fails
// now instead of hanging. Its id is the one found at the top level; when
// that cannot be read, the id is null, which peer takes as an answer to
// every call waiting. who names the sender for the error ("server X").
func malformedResponse(who string, line []byte) (*jsonrpc.Response, bool) {
	t := scanTop(line)
	if !t.object || t.method || (!t.response && t.id == nil) {
		return nil, false
	}
	id, idOK := parseID(t.id)
	var reason string
	switch {
	case t.control:
		reason = "a raw control character inside a string"
	case t.depth > sdkMaxDepth:
		reason = "nesting deeper than " + strconv.Itoa(sdkMaxDepth) + " levels"
	case t.id == nil:
		reason = "no id"
	case !idOK:
		reason = "an id that is neither a string nor an integer"
	default:
		reason = "not valid JSON-RPC 2.0"
	}
	return &jsonrpc.Response{ID: id, Error: rpcError(jsonrpc.CodeInternalError, "%s sent a malformed response: %s", who, reason)}, true
}

// parseID reads a raw JSON-RPC id: a string of valid Unicode or an
// integer below 2^53 in magnitude (what is answered under the same id).
func parseID(raw []byte) (jsonrpc.ID, bool) {
	if len(raw) == 0 {
		return jsonrpc.ID{}, false
	}
	var v any
	if raw[0] == '"' {
		var s string
		if !exactString(raw) || json.Unmarshal(raw, &s) != nil {
			return jsonrpc.ID{}, false
		}
		v = s
	} else {
		// MakeID takes numbers as float64: exact up to 2^53.
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n >= 1<<53 || n <= -(1<<53) {
			return jsonrpc.ID{}, false
		}
		v = float64(n)
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil
}

// sdkMethods are the calls the go-sdk's server takes from a client (the
// requests among its serverMethodInfos; no use here asks about a
// notification). A call of any other is refused as unknown; one whose
// params do not decode is answered by its decoder, with Go type names.
var sdkMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true, "subscriptions/listen": true,
	"tools/list": true, "tools/call": true, "prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true, "logging/setLevel": true,
}

// badParams answers a call of a known method whose params are there but
// are no JSON object, which MCP's always are: the go-sdk would answer with
// its decoder's message naming Go types, and for initialize with code 0.
func badParams(req *jsonrpc.Request) *jsonrpc.Error {
	p := bytes.TrimSpace(req.Params)
	if !req.IsCall() || !sdkMethods[req.Method] || len(p) == 0 || p[0] == '{' || string(p) == "null" {
		return nil
	}
	return rpcError(jsonrpc.CodeInvalidParams, `invalid params: "params" must be an object`)
}

// noMessage reports whether msg, decoded from b, is an object with an id
// and neither a method nor a result or error: no request, notification or
// response. The go-sdk takes it for a response to nothing and drops it.
func noMessage(msg jsonrpc.Message, b []byte) bool {
	r, ok := msg.(*jsonrpc.Response)
	return ok && r.Result == nil && r.Error == nil && !scanTop(b).response
}
