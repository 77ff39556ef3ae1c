package gateway

import (
	"context"
	"encoding/json"
)

// Roots for servers spoken to in the 2026 revision. A session-based server
// asks roots/list as a request of its own, which the gateway answers with
// the sandbox's mounts (upstream_route.go). A 2026 server asks it as an
// input request of an input_required result, which would otherwise reach
// the client and come back with the client's roots: host paths that do not
// exist in the sandbox and disclose the host's layout. So the gateway
// answers it here too, with the same mounts:
//
//   - a round whose input requests are all roots/list never reaches the
//     client: the gateway retries the server at once with the mounts and
//     the server's requestState (at most rootsRounds times per request);
//   - a round that also asks something else reaches the client whole, but
//     every input response that carries roots is replaced by the mounts
//     on its way back to the server (upstreamRoots), so the client's
//     roots never reach a server, whatever it answers.

// rootsRounds bounds the roots-only rounds the gateway answers for one
// request before it hands the round to the client (whose answer is
// replaced anyway).
const rootsRounds = 8

// mrtrMethods are the requests that may get an input_required result.
var mrtrMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// sandboxRoots is the roots/list answer for b's server: its sandbox's
// mounts.
func (b *bound) sandboxRoots() json.RawMessage {
	b.u.mu.Lock()
	roots := b.u.proc.roots()
	b.u.mu.Unlock()
	raw, _ := json.Marshal(map[string]any{"roots": roots})
	return raw
}

// upstreamRoots replaces, in the inputResponses of params, every response
// that carries roots with the sandbox's.
func (b *bound) upstreamRoots(params map[string]any) {
	v, ok := params["inputResponses"]
	if !ok {
		return
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return
	}
	var responses map[string]json.RawMessage
	if json.Unmarshal(raw, &responses) != nil {
		// Not a map: the server refuses it as it would without the gateway.
		return
	}
	changed := false
	for k, r := range responses {
		var fields map[string]json.RawMessage
		if json.Unmarshal(r, &fields) != nil {
			continue
		}
		if _, ok := fields["roots"]; ok {
			responses[k] = b.sandboxRoots()
			changed = true
		}
	}
	if changed {
		params["inputResponses"] = responses
	}
}

// rootsOnly reports whether raw is an input_required result whose input
// requests are all roots/list, and returns its keys and requestState.
func rootsOnly(raw json.RawMessage) (keys []string, state *string, ok bool) {
	var res struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
		RequestState *string `json:"requestState"`
	}
	if json.Unmarshal(raw, &res) != nil || res.ResultType != "input_required" || len(res.InputRequests) == 0 {
		return nil, nil, false
	}
	for k, r := range res.InputRequests {
		if r.Method != "roots/list" {
			return nil, nil, false
		}
		keys = append(keys, k)
	}
	return keys, res.RequestState, true
}

// answerRoots answers the roots-only rounds of a 2026 server's result
// itself (see above) and returns the first result that is not one.
func (d *downstream) answerRoots(ctx context.Context, b *bound, p *peer, method string, params map[string]any, raw json.RawMessage, evs *events) (json.RawMessage, error) {
	for range rootsRounds {
		keys, state, ok := rootsOnly(raw)
		if !ok {
			return raw, nil
		}
		roots := b.sandboxRoots()
		responses := make(map[string]json.RawMessage, len(keys))
		for _, k := range keys {
			responses[k] = roots
		}
		params["inputResponses"] = responses
		if state != nil {
			params["requestState"] = *state
		} else {
			delete(params, "requestState")
		}
		var err error
		if raw, err = p.callWith(ctx, method, params, evs); err != nil {
			return nil, err
		}
	}
	return raw, nil
}
