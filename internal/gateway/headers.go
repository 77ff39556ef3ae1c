package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// checkParamHeaders checks the Mcp-Param-* headers of a 2026 tools/call
// against its arguments (SEP-2243): each argument the tool's input schema
// marks with x-mcp-header must be mirrored in its header, and no such
// header may stand for an absent one, so that an intermediary routing on
// the headers sees what the server will run. The SDK can only check the
// tools it serves itself; these are the upstreams'. A session not bound
// yet knows no tools and checks nothing.
func (d *downstream) checkParamHeaders(ctx context.Context, header http.Header, body []byte) error {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name      string                     `json:"name"`
			Arguments map[string]json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
		return nil
	}
	b, tool, ok := d.route(msg.Params.Name, func(b *bound) bool { return b.ok && b.u.info().caps.Tools != nil })
	if !ok {
		return nil
	}
	// The server's own definition: the List hook (lookup) may pass an
	// item without it, and a tool it hides is refused later anyway.
	l, err := b.u.listing(ctx, KindTools)
	if err != nil {
		return nil
	}
	i := slices.IndexFunc(l.items, func(it Item) bool { return it.Key == tool })
	if i < 0 {
		return nil
	}
	def := l.items[i]
	var schema struct {
		InputSchema struct {
			Properties map[string]headerProp `json:"properties"`
		} `json:"inputSchema"`
	}
	if json.Unmarshal(def.Raw, &schema) != nil {
		return nil
	}
	for _, hp := range paramHeaders(schema.InputSchema.Properties, nil) {
		name := "Mcp-Param-" + hp.header
		got := header.Get(name)
		arg, present := lookupArg(msg.Params.Arguments, hp.path)
		if !present || string(arg) == "null" {
			if got != "" {
				return fmt.Errorf("header mismatch: unexpected %s header for absent parameter %q", name, strings.Join(hp.path, "."))
			}
			continue
		}
		if got == "" {
			return fmt.Errorf("header mismatch: missing %s header for parameter %q", name, strings.Join(hp.path, "."))
		}
		decoded, ok := decodeParamHeader(got)
		if !ok {
			return fmt.Errorf("header mismatch: %s header contains invalid Base64 encoding", name)
		}
		want, ok := primitiveText(arg)
		if !ok || decoded != want {
			return fmt.Errorf("header mismatch: %s header does not match parameter %q", name, strings.Join(hp.path, "."))
		}
	}
	return nil
}

// headerProp is what checkParamHeaders reads of a schema property.
type headerProp struct {
	XMCPHeader string                `json:"x-mcp-header"`
	Properties map[string]headerProp `json:"properties"`
}

type paramHeader struct {
	header string
	path   []string
}

// paramHeaders lists the x-mcp-header annotations at any depth, in a
// stable order.
func paramHeaders(props map[string]headerProp, prefix []string) []paramHeader {
	var out []paramHeader
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p := props[name]
		path := append(slices.Clone(prefix), name)
		if p.XMCPHeader != "" {
			out = append(out, paramHeader{header: p.XMCPHeader, path: path})
		}
		out = append(out, paramHeaders(p.Properties, path)...)
	}
	return out
}

func lookupArg(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	var cur json.RawMessage
	obj := args
	for i, part := range path {
		v, ok := obj[part]
		if !ok {
			return nil, false
		}
		cur = v
		if i < len(path)-1 {
			obj = nil
			if json.Unmarshal(cur, &obj) != nil {
				return nil, false
			}
		}
	}
	return cur, cur != nil
}

// decodeParamHeader undoes SEP-2243's =?base64?...?= wrapping.
func decodeParamHeader(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			return string(b), err == nil
		}
	}
	return v, true
}

// primitiveText is a string, boolean or safe integer argument as its
// header text.
func primitiveText(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		n, err := strconv.ParseInt(v.String(), 10, 64)
		if err != nil || n > 1<<53-1 || n < -(1<<53-1) {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

// codeHeaderMismatch is SEP-2243's error code for headers that do not
// match the body.
const codeHeaderMismatch = -32020

// paramHeaderGuard answers a 2026 tools/call whose Mcp-Param-* headers do
// not match its arguments with 400 and codeHeaderMismatch, before the
// SDK reads it.
func (g *Gateway) paramHeaderGuard(d *downstream, maxBody int64, w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "tools/call" {
		return true
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || int64(len(body)) > maxBody {
		return true // the SDK refuses it
	}
	if err := d.checkParamHeaders(r.Context(), r.Header, body); err != nil {
		var id struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(body, &id)
		if !validID(id.ID) {
			id.ID = json.RawMessage("null")
		}
		msg, _ := json.Marshal(err.Error())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id.ID, codeHeaderMismatch, msg)
		return false
	}
	return true
}
