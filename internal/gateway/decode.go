package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	sjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeMessage is jsonrpc.DecodeMessage without its per-call decoder:
// the go-sdk parses through a json.Decoder whose first read allocates a
// 32 KiB buffer, for every message, which on a small tool call is most of
// the gateway's garbage and so of its GC pauses (issue 19). It parses
// with the same parser and flags (exact key match, no case folding: a
// "Method" key is not "method"), the same nesting bound, and builds the
// same messages; TestDecodeMessageMatchesSDK and FuzzDecodeMessage hold
// it to the go-sdk's. It differs on one point: it refuses a numeric id
// that the go-sdk would change (errInexactID).
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	if err := checkDepth(data, maxDepth); err != nil {
		return nil, err
	}
	var msg wireDecode
	if _, err := sjson.Parse(data, &msg, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if msg.VersionTag != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", msg.VersionTag, "2.0")
	}
	// The go-sdk's MakeID truncates a number to an int64 through a
	// float64: an id of 1.5, or one past 2^53, would be answered under
	// another. Such a message is refused (and answered under its own id,
	// answerInvalid), where the go-sdk would take it.
	if f, ok := msg.ID.(float64); ok && (f != math.Trunc(f) || math.Abs(f) >= 1<<53) {
		return nil, errInexactID
	}
	// A string id is decoded with invalid UTF-8 and lone surrogates
	// replaced by U+FFFD: answered, it would come back as another.
	if str, ok := msg.ID.(string); ok && strings.ContainsRune(str, utf8.RuneError) && !exactString(scanTop(data).id) {
		return nil, errInexactID
	}
	id, err := jsonrpc.MakeID(msg.ID)
	if err != nil {
		return nil, err
	}
	if len(msg.Method) > 0 {
		// The "method" key was present; its value may be "".
		var method string
		if _, err := sjson.Parse(msg.Method, &method, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: msg.Params}, nil
	}
	if !id.IsValid() {
		return nil, errInvalidRequest
	}
	resp := &jsonrpc.Response{ID: id, Result: msg.Result}
	if msg.Error != nil { // not a typed nil in the error interface
		resp.Error = msg.Error
	}
	return resp, nil
}

// wireDecode is the go-sdk's decode form of a JSON-RPC message.
type wireDecode struct {
	VersionTag string          `json:"jsonrpc"`
	ID         any             `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error  `json:"error,omitempty"`
}

var errInvalidRequest = errors.New("JSON RPC invalid request")

// errInexactID refuses an id that would be answered as another: a
// number that is not an integer below 2^53 in magnitude, a string that
// is not valid Unicode.
var errInexactID = errors.New("an id must be a string of valid Unicode or an integer below 2^53")

// exactString reports whether raw, a JSON string literal, decodes
// without a replacement: its bytes are UTF-8 and each escaped surrogate
// is one of a pair.
func exactString(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || !utf8.Valid(raw) {
		return false
	}
	s := string(raw[1 : len(raw)-1])
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		i++
		if i >= len(s) || s[i] != 'u' {
			continue
		}
		r, ok := hex4(s[i+1:])
		if !ok {
			return false
		}
		i += 4
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return false // a low surrogate with no high one before it
		case r >= 0xd800 && r <= 0xdbff:
			if len(s) < i+7 || s[i+1] != '\\' || s[i+2] != 'u' {
				return false
			}
			lo, ok := hex4(s[i+3:])
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return false
			}
			i += 6
		}
	}
	return true
}

// hex4 reads the four hex digits a \u escape starts s with.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(s[:4], 16, 32)
	return rune(n), err == nil
}

// maxDepth is the go-sdk's bound on JSON nesting.
const maxDepth = 1000

// checkDepth refuses JSON nested deeper than max objects and arrays,
// skipping strings, as the go-sdk does before it parses.
func checkDepth(data []byte, max int) error {
	depth, inString, escaped := 0, false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > max {
				return fmt.Errorf("json: exceeded maximum nesting depth of %d", max)
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
