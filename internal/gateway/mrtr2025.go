package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Multi round-trip results of a 2026 server, translated for a 2025-era
// client (the reverse of mrtr.go).
//
// A server that speaks only the sessionless revision (it refuses
// initialize) serves a session-based client's instance in that revision
// too (upstream.open). Its tools/call, prompts/get and resources/read may
// then end in an input_required result, which a 2025 client does not
// know. The gateway answers such a result itself, inside the client's
// request: each elicitation or sampling input request becomes a
// server-to-client request to that client, on the request's own stream
// (as a session-based server's own requests are routed, downstream.request);
// each roots/list input request is answered with the sandbox's mounts
// (roots2026.go), never reaching the client; and the request is retried
// at the server with the answers and the server's requestState, until a
// final result, for at most inputRounds rounds and within the call's
// timeout. The level a 2025 client set with logging/setLevel, which the
// new revision does not have, goes with each of its requests to such a
// server as the per-request level (downstream.call).

// inputRounds bounds the input_required rounds the gateway answers for a
// 2025 client's request.
const inputRounds = 8

// inputRequiredResult is an input_required result as the gateway reads it.
type inputRequiredResult struct {
	ResultType    string `json:"resultType"`
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	RequestState *string `json:"requestState"`
}

// mayRequireInput reports whether raw could decode to a resultType of
// "input_required" (every final result is parsed for it otherwise: a
// full parse of each result, however large). Only if the bytes hold
// the value as written or hold a \u escape: no other JSON escape
// decodes to a letter or "_", and invalid UTF-8 decodes to U+FFFD, so a
// server cannot escape the value past this. TestMayRequireInput holds
// it to the parse.
func mayRequireInput(raw []byte) bool {
	return bytes.Contains(raw, []byte("input_required")) || bytes.Contains(raw, []byte(`\u`))
}

// answerInputs answers the input_required rounds of a 2026 server's
// result for a 2025 client (see above) and returns the final result.
func (d *downstream) answerInputs(ctx context.Context, b *bound, p *peer, method string, params map[string]any, raw json.RawMessage, evs *events) (json.RawMessage, error) {
	for range inputRounds {
		if !mayRequireInput(raw) {
			return raw, nil
		}
		var res inputRequiredResult
		if json.Unmarshal(raw, &res) != nil || res.ResultType != "input_required" {
			return raw, nil
		}
		if len(res.InputRequests) == 0 {
			return nil, rpcError(jsonrpc.CodeInternalError, "mcpbox: server %s asked for input without saying what", b.srv.Name)
		}
		keys := make([]string, 0, len(res.InputRequests))
		for k := range res.InputRequests {
			keys = append(keys, k)
		}
		slices.Sort(keys) // the client is asked in a stable order
		responses := make(map[string]json.RawMessage, len(keys))
		for _, k := range keys {
			r := res.InputRequests[k]
			switch r.Method {
			case "roots/list":
				responses[k] = b.sandboxRoots()
			case "elicitation/create", "sampling/createMessage":
				params := r.Params
				if len(params) == 0 {
					params = json.RawMessage(`{}`)
				}
				out, err := d.request(ctx, r.Method, d.gw.filter(b.srv.Name, params))
				if err != nil {
					return nil, err
				}
				responses[k] = out
			default:
				return nil, rpcError(jsonrpc.CodeInternalError, "mcpbox: server %s asked the client %q, which the gateway does not forward", b.srv.Name, r.Method)
			}
		}
		params["inputResponses"] = responses
		if res.RequestState != nil {
			params["requestState"] = *res.RequestState
		} else {
			delete(params, "requestState")
		}
		var err error
		if raw, err = p.callWith(ctx, method, params, evs); err != nil {
			return nil, err
		}
	}
	var res inputRequiredResult
	if json.Unmarshal(raw, &res) != nil || res.ResultType != "input_required" {
		return raw, nil
	}
	return nil, rpcError(jsonrpc.CodeInternalError, "mcpbox: server %s still asked for input after %d rounds", b.srv.Name, inputRounds)
}
