package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// checkPOST answers the POSTs whose message the go-sdk's Streamable HTTP
// handler would drop (202) or answer in a form a JSON-RPC client cannot
// read (plain text, code 0, Go type names) with a JSON-RPC error under
// the message's id, as stdio answers them. Only a request the SDK would
// take that far gets one (its headers, its session and its size pass the
// SDK's checks); everything else goes to next as it came.
func (g *Gateway) checkPOST(maxBody int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !sdkTakes(r) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		// The SDK reads the body again, to its end: an error or an
		// oversized body is its to answer.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		if err != nil || int64(len(body)) > maxBody {
			next.ServeHTTP(w, r)
			return
		}
		msg, err := decodeMessage(body)
		if errors.Is(err, errInexactID) {
			// The SDK would take it and answer under another id: refused
			// under the request's own, written as it came.
			writeRawError(w, scanTop(body).id, jsonrpc.CodeInvalidRequest, err.Error())
			return
		}
		if err != nil {
			next.ServeHTTP(w, r) // not JSON, or a batch: the SDK's
			return
		}
		if noMessage(msg, body) {
			writeRPCError(w, http.StatusBadRequest, msg.(*jsonrpc.Response).ID, rpcError(jsonrpc.CodeInvalidRequest, "not a JSON-RPC 2.0 request"))
			return
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() || isModernHTTP(r) {
			// The stateless handler answers these as JSON-RPC itself.
			next.ServeHTTP(w, r)
			return
		}
		sid := r.Header.Get("Mcp-Session-Id")
		switch {
		case sid != "" && g.byMCP(sid, agentOf(r)) == nil:
			next.ServeHTTP(w, r) // the SDK refuses it: no such session, or another's
		case !sdkMethods[req.Method]:
			// Answered by the SDK with 400, as it was, but as JSON-RPC.
			next.ServeHTTP(&notFound{ResponseWriter: w, id: req.ID, method: req.Method}, r)
		case sid == "" && needsSession(req):
			writeRPCError(w, http.StatusBadRequest, req.ID, rpcError(jsonrpc.CodeInvalidRequest,
				"no Mcp-Session-Id header: send the one the initialize response carried, or initialize first"))
		default:
			if e := badParams(req); e != nil {
				writeRPCError(w, http.StatusOK, req.ID, e)
				return
			}
			next.ServeHTTP(w, r)
		}
	})
}

// sdkTakes reports whether the SDK's handler would read a POST's body:
// its Content-Type, Accept and MCP-Protocol-Version headers pass the
// SDK's checks, and it asks for no replay (Last-Event-ID). It is the
// stricter of the two: an Accept the SDK takes by a wildcard is left to
// the SDK.
func sdkTakes(r *http.Request) bool {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	accept := strings.Join(r.Header.Values("Accept"), ",")
	v := r.Header.Get("MCP-Protocol-Version")
	return ct == "application/json" &&
		strings.Contains(accept, "application/json") && strings.Contains(accept, "text/event-stream") &&
		(v == "" || v >= ModernVersion || slices.Contains(mcp.SupportedProtocolVersions(), v)) &&
		len(r.Header.Values("Last-Event-ID")) == 0
}

// needsSession reports whether a legacy call is refused without a
// protocol session: all but initialize, ping and server/discover, which
// the SDK answers before one, and a request of the sessionless revision
// (its _meta names a version), which the SDK refuses for its version.
func needsSession(req *jsonrpc.Request) bool {
	switch req.Method {
	case "initialize", "ping", "server/discover":
		return false
	}
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &p) == nil {
		if _, ok := p.Meta[mcp.MetaKeyProtocolVersion]; ok {
			return false
		}
	}
	return true
}

// writeRPCError answers an HTTP request with a JSON-RPC error response.
func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, e *jsonrpc.Error) {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: e})
	if err != nil {
		http.Error(w, e.Message, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}

// writeRawError answers 400 with a JSON-RPC error under id as the
// request wrote it (JSON), which jsonrpc.ID could not hold; null unless
// it is a string or number in valid UTF-8.
func writeRawError(w http.ResponseWriter, id []byte, code int64, msg string) {
	if !utf8.Valid(id) || !validID(id) {
		id = []byte("null")
	}
	text, _ := json.Marshal(msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, code, text)
}

// notFound turns the SDK's plain-text 400 for a call of a method it does
// not know into a JSON-RPC error -32601, as stdio answers it. Any other
// answer passes as it is.
type notFound struct {
	http.ResponseWriter
	id      jsonrpc.ID
	method  string
	swallow bool // the SDK's text is not written
}

func (n *notFound) WriteHeader(status int) {
	if status == http.StatusBadRequest && strings.HasPrefix(n.Header().Get("Content-Type"), "text/plain") {
		n.swallow = true
		n.Header().Del("X-Content-Type-Options")
		writeRPCError(n.ResponseWriter, status, n.id, rpcError(jsonrpc.CodeMethodNotFound, "method not found: %q", echoName(n.method)))
		return
	}
	n.ResponseWriter.WriteHeader(status)
}

func (n *notFound) Write(b []byte) (int, error) {
	if n.swallow {
		return len(b), nil
	}
	return n.ResponseWriter.Write(b)
}

func (n *notFound) Flush() {
	if f, ok := n.ResponseWriter.(http.Flusher); ok && !n.swallow {
		f.Flush()
	}
}

func (n *notFound) Unwrap() http.ResponseWriter { return n.ResponseWriter }
