package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	sjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// checkParamHeaders is the early form of paramHeaderCheck, run on the
// call as the SDK will read it from the raw body (postedCall), before it
// does, so that a mismatch is answered with 400 as SEP-2243 asks. It
// checks nothing for a session not bound yet (it knows no tools), nor
// for a call that may be for a server still starting; paramHeaderCheck,
// on the dispatcher's own decode of the same request, is the check that
// fails closed.
func (d *downstream) checkParamHeaders(ctx context.Context, header http.Header, p *mcp.CallToolParamsRaw) error {
	if _, _, ok := d.route(p.Name, func(b *bound) bool { return b.ok() && b.u.info().caps.Tools != nil }); !ok {
		return nil
	}
	if _, _, starting := d.route(p.Name, func(b *bound) bool { return b.state.Load() == nil }); starting {
		return nil
	}
	return d.paramHeaderCheck(ctx, header, p)
}

// paramHeaderCheck checks the Mcp-Param-* headers of a 2026 tools/call of
// tool name (as the client names it) against its arguments (SEP-2243):
// each argument the tool's input schema marks with x-mcp-header must be
// mirrored in its header, and no such header may stand for an absent
// one, so that an intermediary routing on the headers sees what the
// server will run. The SDK can only check the tools it serves itself;
// these are the upstreams'. It fails closed: a call it cannot check (its
// server's tool list cannot be had, the tool is not in it, its schema or
// arguments cannot be read, an argument object names a key twice) is
// refused, and so is a call that may be for a server still starting. A
// name no server serves, or a tool this client was not given, passes:
// the call is refused as an unknown tool and nothing runs. A call it
// refuses is told to Hooks.Unknown, so that the audit has its record.
func (d *downstream) paramHeaderCheck(ctx context.Context, header http.Header, p *mcp.CallToolParamsRaw) (err error) {
	name, rawArgs := p.Name, p.Arguments
	if b, tool, starting := d.route(name, func(b *bound) bool { return b.state.Load() == nil }); starting {
		// Its tools are not known yet, so the call cannot be checked; and
		// it must not run on a server that joined after the check.
		d.tellUnknown(p, b, tool, UnknownNotStarted)
		if settingUp(b.srv) {
			return rpcError(codeUnavailable, "server %s is still being set up (%s): the call cannot be checked before it runs; try again later", b.srv.Name, settingUpWhy)
		}
		return rpcError(codeUnavailable, "server %s is still starting: the call cannot be checked before it runs; try again shortly", b.srv.Name)
	}
	b, tool, ok := d.route(name, func(b *bound) bool { return b.ok() && b.u.info().caps.Tools != nil })
	if !ok || !b.srv.allowed(tool) {
		return nil
	}
	why := UnknownHeaderMismatch
	defer func() {
		if err != nil {
			if why == UnknownUnlistable && ctx.Err() != nil {
				why = UnknownCancelled
			}
			d.tellUnknown(p, b, tool, why)
		}
	}()
	// A tool this client was not given passes too, whether it exists or
	// not: callTool answers "unknown tool" and audits it, the same for
	// both, so that a header error tells no client which hidden tools
	// exist (nor their x-mcp-header parameters).
	if _, given, err := d.lookup(ctx, b, KindTools, tool); err != nil {
		why = UnknownUnlistable
		return unlistable(b, err)
	} else if !given {
		return nil
	}
	// The server's own definition: the List hook (lookup) may pass an
	// item without it.
	l, err := b.u.listing(ctx, KindTools)
	if err != nil {
		why = UnknownUnlistable
		return unlistable(b, err)
	}
	i := slices.IndexFunc(l.items, func(it Item) bool { return it.Key == tool })
	if i < 0 {
		return fmt.Errorf("cannot check the Mcp-Param headers: tool %q is not in its server's tool list", name)
	}
	props, err := inputProps(l.items[i].Raw)
	if err != nil {
		return fmt.Errorf("cannot check the Mcp-Param headers: the input schema of tool %q cannot be read", name)
	}
	// A tool left out of the client's list for its annotations
	// (clientTool) is not called by guess either.
	if f := headerFault(props, "", map[string]bool{}); f != "" {
		return fmt.Errorf("cannot check the Mcp-Param headers: tool %q: %s", name, f)
	}
	hps := paramHeaders(props, nil)
	if len(hps) == 0 {
		return nil
	}
	var args map[string]json.RawMessage
	if len(rawArgs) > 0 && string(rawArgs) != "null" {
		if json.Unmarshal(rawArgs, &args) != nil {
			return errors.New("cannot check the Mcp-Param headers: the arguments are not an object")
		}
		// Parsers differ on which of two equal keys counts: the header
		// would be checked against one and the server could read the other.
		if k, dup := duplicateKey(rawArgs); dup {
			return fmt.Errorf("cannot check the Mcp-Param headers: the arguments name %q twice", k)
		}
	}
	for _, hp := range hps {
		name := "Mcp-Param-" + hp.header
		// One value only: an intermediary could route on another of them
		// (or on all joined) than the one checked.
		if vv := header.Values(name); len(vv) > 1 {
			return fmt.Errorf("header mismatch: %s header sent %d times", name, len(vv))
		}
		got := header.Get(name)
		arg, present := lookupArg(args, hp.path)
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

// checkModernCall runs paramHeaderCheck on a 2026 tools/call that came
// over HTTP, with the dispatcher's own decode of its name and arguments
// (the session is bound by now, so its tools are known).
func (d *downstream) checkModernCall(ctx context.Context, req mcp.Request) error {
	p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
	if !ok || p == nil {
		return nil
	}
	extra := req.GetExtra()
	if extra == nil || extra.Header == nil {
		return nil // not over HTTP: there are no headers to check
	}
	if err := d.paramHeaderCheck(ctx, extra.Header, p); err != nil {
		if we := (*jsonrpc.Error)(nil); errors.As(err, &we) {
			return err // not about the headers: a server still starting
		}
		return rpcError(codeHeaderMismatch, "%s", err.Error())
	}
	return nil
}

// duplicateKey reports a key that an object in raw (at any depth) names
// twice.
func duplicateKey(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // in an object, the next token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false // io.EOF, or malformed: the decode refuses it
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expect {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return k, true
				}
				top.keys[k] = true
				top.expect = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the parent object expects a key next.
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expect = true
		}
	}
}

// unlistable is the error of a call whose headers cannot be checked
// because b's tools cannot be listed: what the client can do about it
// when the listing's error says (a remote server that needs a login), as
// a 2025 client's call is told.
func unlistable(b *bound, err error) error {
	var cm ClientMessage
	if errors.As(err, &cm) {
		return rpcError(codeUnavailable, "%s", cm.ClientMessage())
	}
	return fmt.Errorf("cannot check the Mcp-Param headers: listing the tools of server %s failed", b.srv.Name)
}

// paramHeadersKey is the context key of a tools/call's Mcp-Param-*
// headers for its server (ParamHeaders).
type paramHeadersKey struct{}

// ParamHeaders are the Mcp-Param-* headers (SEP-2243) that the tools/call
// whose request context ctx is owes a server spoken to in the 2026
// revision: the arguments its own tool definition marks with
// x-mcp-header, encoded as the go-sdk does. A transport that speaks HTTP
// to the server sets them on the call's POST; nil for any other request.
func ParamHeaders(ctx context.Context) map[string]string {
	h, _ := ctx.Value(paramHeadersKey{}).(map[string]string)
	return h
}

// withParamHeaders returns ctx carrying the Mcp-Param-* headers of the
// tools/call params for b's server, if its definition of the tool asks
// for any. A server that checks them refuses a call without them.
func withParamHeaders(ctx context.Context, b *bound, params map[string]any) context.Context {
	name, _ := params["name"].(string)
	args, _ := params["arguments"].(json.RawMessage)
	l, err := b.u.listing(ctx, KindTools)
	if err != nil || len(args) == 0 {
		return ctx
	}
	i := slices.IndexFunc(l.items, func(it Item) bool { return it.Key == name })
	if i < 0 || !bytes.Contains(l.items[i].Raw, []byte("x-mcp-header")) {
		return ctx
	}
	props, err := inputProps(l.items[i].Raw)
	var argm map[string]json.RawMessage
	if err != nil || json.Unmarshal(args, &argm) != nil {
		return ctx
	}
	hps := paramHeaders(props, nil)
	h := map[string]string{}
	for _, hp := range hps {
		arg, present := lookupArg(argm, hp.path)
		if !present || string(arg) == "null" {
			continue
		}
		if text, ok := primitiveText(arg); ok {
			h["Mcp-Param-"+hp.header] = encodeParamHeader(text)
		}
	}
	if len(h) == 0 {
		return ctx
	}
	return context.WithValue(ctx, paramHeadersKey{}, h)
}

// encodeParamHeader is a header's text as SEP-2243 writes it: as it is,
// or base64 in =?base64?...?= when it has leading or trailing blanks,
// bytes outside printable ASCII, or reads as such a wrapper itself.
func encodeParamHeader(s string) string {
	wrap := strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?=") ||
		s != "" && (strings.ContainsAny(s[:1]+s[len(s)-1:], " \t") || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }))
	if !wrap {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// inputProps are the properties of a tool definition's input schema, as
// the x-mcp-header annotations are read of them (paramHeaders,
// headerFault).
func inputProps(def json.RawMessage) (map[string]headerProp, error) {
	var schema struct {
		InputSchema struct {
			Properties map[string]headerProp `json:"properties"`
		} `json:"inputSchema"`
	}
	if err := json.Unmarshal(def, &schema); err != nil {
		return nil, err
	}
	return schema.InputSchema.Properties, nil
}

// headerProp is what checkParamHeaders reads of a schema property.
type headerProp struct {
	Type       json.RawMessage       `json:"type"`
	XMCPHeader json.RawMessage       `json:"x-mcp-header"`
	Properties map[string]headerProp `json:"properties"`
}

// UnmarshalJSON reads what it can: a property that is not an object (a
// boolean schema) or a "properties" that is not one has no annotations
// of its own, and does not make the whole schema unreadable.
func (p *headerProp) UnmarshalJSON(b []byte) error {
	var f struct {
		Type       json.RawMessage `json:"type"`
		XMCPHeader json.RawMessage `json:"x-mcp-header"`
		Properties json.RawMessage `json:"properties"`
	}
	*p = headerProp{}
	if json.Unmarshal(b, &f) != nil {
		return nil
	}
	p.Type, p.XMCPHeader = f.Type, f.XMCPHeader
	_ = json.Unmarshal(f.Properties, &p.Properties)
	return nil
}

// header is the property's x-mcp-header annotation, "" if it has none
// or one that is not a string.
func (p headerProp) header() string {
	var h string
	_ = json.Unmarshal(p.XMCPHeader, &h)
	return h
}

// paramHeaderFault says what is wrong with a tool definition's
// x-mcp-header annotations, "" if nothing is. A server's tool with such
// annotations is left out of the list clients get (clientTool), as
// SEP-2243 asks of a client and the go-sdk's does: its header could not
// be written (a name outside HTTP's token characters), two arguments
// would claim one header, or a header could not mirror its argument (not
// a string, integer or boolean).
func paramHeaderFault(def json.RawMessage) string {
	props, err := inputProps(def)
	if err != nil {
		return "its input schema cannot be read"
	}
	return headerFault(props, "", map[string]bool{})
}

// headerFault is paramHeaderFault for the properties props at path
// prefix, seen holding the header names (lower case) met so far.
func headerFault(props map[string]headerProp, prefix string, seen map[string]bool) string {
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p, path := props[name], prefix+name
		if p.XMCPHeader != nil {
			h := p.header()
			if h == "" || strings.ContainsFunc(h, func(r rune) bool { return !isTokenChar(r) }) {
				return fmt.Sprintf("property %q: x-mcp-header %s is not an HTTP header name", path, p.XMCPHeader)
			}
			var typ string
			_ = json.Unmarshal(p.Type, &typ)
			if typ != "string" && typ != "integer" && typ != "boolean" {
				return fmt.Sprintf("property %q: x-mcp-header on a property of type %s, not string, integer or boolean", path, cmp.Or(string(p.Type), "(none)"))
			}
			if seen[strings.ToLower(h)] {
				return fmt.Sprintf("property %q: header %q is named twice", path, h)
			}
			seen[strings.ToLower(h)] = true
		}
		if f := headerFault(p.Properties, path+".", seen); f != "" {
			return f
		}
	}
	return ""
}

// isTokenChar reports whether r is one of HTTP's token characters
// (RFC 9110, tchar), of which a header name is made.
func isTokenChar(r rune) bool {
	return r < 0x80 && (r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
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
		if h := p.header(); h != "" {
			out = append(out, paramHeader{header: h, path: path})
		}
		out = append(out, paramHeaders(p.Properties, path)...)
	}
	return out
}

func lookupArg(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	if args == nil {
		return nil, false
	}
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

// posted is a 2026 tools/call POST on its way to the SDK, which answers
// some such calls itself before the gateway's session sees them (a
// missing or mismatched Mcp-Method, Mcp-Name or MCP-Protocol-Version, no
// protocol version in _meta). Whoever is first claims it: the session's
// receive middleware when the call reaches it (takePosted), or, once the
// SDK has answered, tellUnclaimed, which tells Hooks.Unknown of it, so
// that the audit has one record for every such call and a call the SDK
// answered never runs after.
type posted struct {
	p     *mcp.CallToolParamsRaw
	why   string       // the refusal the headers foretell, or ""
	claim atomic.Int32 // claimOpen, then claimSession or claimRefused
}

type postedKey struct{}

// postedCall returns the tools/call request with an id that the SDK will
// read from body (its decode: exact keys, the last of two equal keys),
// or nil. Its why is UnknownHeaderMismatch when the SDK will refuse its
// Mcp-Method or Mcp-Name header (validateMcpHeaders: missing, not the
// body's, or a name it cannot read from the params, such as a number).
func postedCall(header http.Header, body []byte) *posted {
	msg, err := decodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || req.Method != "tools/call" || !req.ID.IsValid() {
		return nil
	}
	c := &posted{p: callParams(req.Params)}
	if c.p == nil || header.Get("Mcp-Method") != req.Method || header.Get("Mcp-Name") == "" || header.Get("Mcp-Name") != c.p.Name {
		c.why = UnknownHeaderMismatch
	}
	if c.p == nil {
		c.p = unreadableCall(req.Params)
	}
	return c
}

// The states of posted.claim: whoever moves it from claimOpen first has
// the call.
const (
	claimOpen    = iota // answered by nobody yet
	claimSession        // the session's middleware runs it (takePosted)
	claimRefused        // told to Hooks.Unknown as refused (tellUnclaimed)
)

// takePosted claims the request of ctx for the session, and reports
// false when the SDK has answered it already (it was told as refused).
func takePosted(ctx context.Context) bool {
	c, ok := ctx.Value(postedKey{}).(*posted)
	return !ok || c.claim.CompareAndSwap(claimOpen, claimSession)
}

// tellUnclaimed tells Hooks.Unknown of c if the SDK has answered it
// without the session taking it.
func (d *downstream) tellUnclaimed(c *posted, r *http.Request) {
	if !c.claim.CompareAndSwap(claimOpen, claimRefused) {
		return
	}
	why := c.why
	switch {
	case why != "":
	case r.Context().Err() != nil:
		why = UnknownCancelled
	default:
		why = UnknownProtocolRefused
	}
	b, tool, _ := d.route(c.p.Name, func(b *bound) bool { return b.ok() && b.u.info().caps.Tools != nil })
	d.tellUnknown(c.p, b, tool, why)
}

// unreadableCall is what the audit can say of tools/call params the SDK
// cannot read, when they are an object: their "name" (the raw JSON of one
// that is not a string: `5`, `{...}`) and their "arguments".
func unreadableCall(params json.RawMessage) *mcp.CallToolParamsRaw {
	var keys map[string]json.RawMessage
	if _, err := sjson.Parse(params, &keys, 0); err != nil {
		return &mcp.CallToolParamsRaw{}
	}
	p := &mcp.CallToolParamsRaw{Name: string(keys["name"]), Arguments: keys["arguments"]}
	if _, err := sjson.Parse(keys["name"], &p.Name, 0); err != nil {
		p.Name = string(keys["name"])
	}
	return p
}

// codeHeaderMismatch is SEP-2243's error code for headers that do not
// match the body.
const codeHeaderMismatch = -32020

// paramHeaderGuard answers a 2026 tools/call whose Mcp-Param-* headers do
// not match its arguments with 400 and codeHeaderMismatch, before the
// SDK reads it; it reports false when it did. Otherwise it returns the
// tools/call the SDK will read, if any, for tellUnclaimed.
func (g *Gateway) paramHeaderGuard(d *downstream, maxBody int64, w http.ResponseWriter, r *http.Request) (*posted, bool) {
	if r.Method != http.MethodPost || r.Header.Get("MCP-Protocol-Version") < ModernVersion {
		return nil, true // the SDK checks no header either
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || int64(len(body)) > maxBody {
		return nil, true // the SDK refuses it
	}
	c := postedCall(r.Header, body)
	if c == nil || c.why != "" {
		return c, true // the SDK answers it
	}
	if err := d.checkParamHeaders(r.Context(), r.Header, c.p); err != nil {
		var id struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(body, &id)
		if !validID(id.ID) {
			id.ID = json.RawMessage("null")
		}
		code, text := int64(codeHeaderMismatch), err.Error()
		var werr *jsonrpc.Error
		if errors.As(err, &werr) { // not about the headers: a server's state
			code, text = werr.Code, werr.Message
		}
		msg, _ := json.Marshal(text)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id.ID, code, msg)
		return nil, false
	}
	return c, true
}
