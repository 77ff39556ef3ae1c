package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

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

// errInexactID refuses a numeric id that is not an integer below 2^53 in
// magnitude.
var errInexactID = errors.New("an id must be a string or an integer below 2^53")

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
