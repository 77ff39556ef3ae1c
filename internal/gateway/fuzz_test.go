package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// chunkReader hands out its data in reads of the sizes in sizes (cycled),
// so that lines arrive torn at arbitrary places.
type chunkReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1 + 31
	if len(r.sizes) > 0 {
		n = 1 + int(r.sizes[r.i%len(r.sizes)])%64
		r.i++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

const fuzzSentinel = `{"jsonrpc":"2.0","method":"fuzz/sentinel"}`

// wantLines is the reference framing: split at '\n', a line longer than
// max (newline included) is dropped (or answered with an error when it is
// a response whose id can be read), every other line decodes on its own.
func wantLines(t *testing.T, stream []byte, limit int) []string {
	var out []string
	for len(stream) > 0 {
		seg := stream
		if i := bytes.IndexByte(stream, '\n'); i >= 0 {
			seg = stream[:i+1]
		}
		stream = stream[len(seg):]
		if len(seg) > limit {
			head := seg[:min(len(seg), headSize)]
			tail := seg[max(0, len(seg)-headSize):]
			if id, ok := ResponseID(head, tail); ok {
				out = append(out, encodeMsg(t, &jsonrpc.Response{ID: id, Error: rpcError(jsonrpc.CodeInternalError, "the server's response is larger than the %d-byte message limit", limit)}))
			}
			continue
		}
		if line := bytes.TrimSpace(seg); len(line) > 0 {
			if msg, err := jsonrpc.DecodeMessage(line); err == nil {
				out = append(out, encodeMsg(t, msg))
			} else if resp, ok := malformedResponse("the fuzzer", line); ok {
				// A response that does not decode still ends its call
				// (malformed.go).
				out = append(out, encodeMsg(t, resp))
			}
		}
	}
	return out
}

func encodeMsg(t *testing.T, m jsonrpc.Message) string {
	b, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		t.Fatalf("encoding %#v: %v", m, err)
	}
	return string(b)
}

// FuzzLineConn feeds arbitrary bytes, torn into arbitrary reads, through
// the newline-delimited JSON-RPC reader that both the client's stdio and
// every server's stdout go through. Every line within the limit comes out
// once and in order, exactly as decoding it alone gives (or, for a
// response that does not decode, as the error for its id); an oversized line
// never comes out (at most as an error for its id); no drop sample is
// larger than the limit; and garbage never stops a later valid message.
func FuzzLineConn(f *testing.F) {
	for _, s := range []string{
		"",
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n",
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}` + "\r\n\n  \n",
		"garbage\n{\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":7,"result":{"x":"` + strings.Repeat("a", 400) + `"}}` + "\n",
		`{"jsonrpc":"2.0","result":{"x":"` + strings.Repeat("b", 400) + `"},"id":"q"}` + "\n",
		`{"jsonrpc":"2.0","method":"m","params":{"x":"` + strings.Repeat("c", 400) + `"}}`,
		`{"jsonrpc":"1.0","id":1,"result":1}` + "\n\x00\xff\n",
		`[{"jsonrpc":"2.0","id":1,"method":"a"}]` + "\n",
	} {
		f.Add([]byte(s), []byte{0, 5, 63}, uint8(0))
		f.Add([]byte(s), []byte{}, uint8(200))
	}
	f.Fuzz(func(t *testing.T, data, sizes []byte, extra uint8) {
		// A limit of at least headSize keeps head and tail whole, as
		// with the real 16 MiB limit; the 16-byte buffer makes lines
		// span many buffer fills, as long ones do in production.
		limit := headSize + int(extra)
		stream := append(append(bytes.Clone(data), '\n'), fuzzSentinel+"\n"...)
		c := newLineConn(nil, io.Discard, nopCloser{}, "the fuzzer", limit, func(_ string, sample []byte) {
			if len(sample) > limit {
				t.Fatalf("drop sample of %d bytes, limit %d", len(sample), limit)
			}
		})
		c.r = bufio.NewReaderSize(&chunkReader{data: stream, sizes: sizes}, 16)
		want := wantLines(t, stream, limit)
		var got []string
		for range len(want) + 2 {
			msg, err := c.Read(context.Background())
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("Read: %v", err)
				}
				break
			}
			got = append(got, encodeMsg(t, msg))
		}
		if len(got) == 0 || got[len(got)-1] != encodeMsg(t, mustDecode(t, fuzzSentinel)) {
			t.Fatalf("the sentinel after the input did not come out last: %q", got)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("messages:\n got %q\nwant %q", got, want)
		}
	})
}

func mustDecode(t *testing.T, s string) jsonrpc.Message {
	m, err := jsonrpc.DecodeMessage([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// FuzzResponseID: the id read from an oversized response's first and last
// bytes is the response's own id, never one found elsewhere in it (that
// would fail another caller's request).
func FuzzResponseID(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"result":{"id":2},"id":1,"jsonrpc":"2.0"}`,
		`{"result":"\"id\":3}","id":"x"}`,
		`{"jsonrpc":"2.0","error":{"code":1,"message":"m"},"id":-4}`,
		`{"id":"a\"b","result":null}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		msg, err := jsonrpc.DecodeMessage([]byte(line))
		if err != nil {
			return
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			return
		}
		b := []byte(line)
		id, ok := ResponseID(b[:min(len(b), headSize)], b[max(0, len(b)-headSize):])
		if ok && id != resp.ID {
			t.Fatalf("responseID = %v, the response's id is %v", id.Raw(), resp.ID.Raw())
		}
	})
}

const fuzzToken = "fuzz-token-0123456789"

// refOriginRE is an origin as browsers serialize it (RFC 6454).
var refOriginRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://[^/?#@\s]+$`)

// refLoopbackHost is a simple reference for a loopback Host header: a
// loopback address or localhost, with an optional numeric port.
func refLoopbackHost(h string) bool {
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return refLoopbackAddr(ap.Addr().String())
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[:i], ":") {
		if _, err := netip.ParseAddrPort("0.0.0.0" + h[i:]); err == nil || h[i:] == ":" {
			h = h[:i]
		}
	}
	return refLoopbackAddr(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
}

func refLoopbackAddr(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Zone() == "" && a.Unmap().IsLoopback()
}

// FuzzHTTPHeaders sends requests with arbitrary Host, Origin,
// Authorization and Mcp-Session-Id headers to the real handler (loopback
// bind, one client, one allowed origin). Properties: a request gets past
// the Host check only with a loopback Host, past the Origin check only
// with no Origin or a well-formed allowed or same origin, past
// authentication only carrying the exact token, and with a session id
// never issued it reaches no session (no 2xx). A loopback Host is never
// refused as a Host.
func FuzzHTTPHeaders(f *testing.F) {
	never := func(context.Context, Scope) (*Process, error) { return nil, errors.New("not launched in this test") }
	gw, err := New([]*Server{{Name: "s", Launch: never, Allow: []string{"*"}}}, Options{Version: "test"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { gw.Close() })
	h, err := gw.Handler(HTTPOptions{
		Addr:           "127.0.0.1:8765",
		AllowedOrigins: []string{"http://localhost:*"},
		Clients:        []Client{{Name: "alice", Token: []byte(fuzzToken)}},
	})
	if err != nil {
		f.Fatal(err)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	f.Add(uint8(1), "127.0.0.1:8765", "", "Bearer "+fuzzToken, "s1", init)
	f.Add(uint8(1), "localhost", "http://localhost:3000", "bearer  "+fuzzToken+" ", "s2", init)
	f.Add(uint8(0), "[::1]:8765", "http://127.0.0.1:8765", "Bearer "+fuzzToken, "s3", "")
	f.Add(uint8(2), "evil.example", "null", "Bearer x", "", "{}")
	f.Add(uint8(1), "127.0.0.1.nip.io", "http://localhost:1/x", "Basic "+fuzzToken, "\x00", "[")
	f.Add(uint8(1), "localhost.:1", "http://u@localhost:2", "Bearer "+fuzzToken+"x", "s", init)
	f.Add(uint8(1), "127.0.0.1:8765", "http://u@127.0.0.1:8765", "Bearer "+fuzzToken, "s", init)
	f.Add(uint8(1), "localhost:1", "http://localhost:1?", "Bearer "+fuzzToken, "s", init)
	methods := []string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodOptions}
	f.Fuzz(func(t *testing.T, m uint8, host, origin, authz, session, body string) {
		if session == "" {
			session = "never-issued" // without one, an initialize would open a real session
		}
		r, err := http.NewRequest(methods[int(m)%len(methods)], "http://127.0.0.1:8765"+EndpointPath, strings.NewReader(body))
		if err != nil {
			return
		}
		r.Host = host
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Session-Id", session)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		code, text := w.Code, w.Body.String()
		hostOK := refLoopbackHost(host)
		if hostOK && strings.Contains(text, "invalid Host") {
			t.Fatalf("loopback Host %q refused", host)
		}
		if code == http.StatusForbidden {
			return
		}
		if !hostOK {
			t.Fatalf("Host %q got past the Host check (%d %q)", host, code, text)
		}
		if origin != "" {
			lo := strings.ToLower(origin)
			allowed := refOriginRE.MatchString(lo) && (strings.HasPrefix(lo, "http://localhost:") || lo == "http://localhost" || lo == "http://"+strings.ToLower(host))
			if !allowed {
				t.Fatalf("Origin %q (Host %q) got past the Origin check (%d %q)", origin, host, code, text)
			}
		}
		if code == http.StatusUnauthorized {
			return
		}
		if f := strings.Fields(authz); len(f) != 2 || !strings.EqualFold(f[0], "bearer") || f[1] != fuzzToken {
			t.Fatalf("Authorization %q got past authentication (%d %q)", authz, code, text)
		}
		if code < 300 {
			t.Fatalf("session id %q never issued, got %d %q", session, code, text)
		}
	})
}

// FuzzGatewayGarbage runs the whole stdio gateway with arbitrary bytes
// from both sides: the client writes clientData before a tool call, and
// the server writes serverData before answering it. Property: the call
// still gets its response (a result or an error) and the gateway keeps
// serving; nothing either side sends wedges or ends the session.
func FuzzGatewayGarbage(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""},
		{"garbage", "garbage"},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1000000}}`, `{"jsonrpc":"2.0","id":"x","method":"roots/list"}`},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}}`, `{"jsonrpc":"2.0","id":99,"result":{}}`},
		{"[]\n{}\n\x00", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`},
		{`{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"file:///x"}}`, `{"jsonrpc":"2.0","id":"sampling","method":"sampling/createMessage","params":{}}`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, clientData, serverData string) {
		launch, _ := rawLauncher(t, func(s *rawServer, msg map[string]any) {
			switch msg["method"] {
			case "tools/list":
				s.reply(msg, `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
			case "tools/call":
				s.send(serverData)
				s.reply(msg, `{"content":[{"type":"text","text":"ok"}]}`)
			}
		})
		gw := newGateway(t, &Server{Name: "raw", Launch: launch, Allow: []string{"*"}, Restart: RestartNo})
		c := newRawClient(t, gw)
		c.nextID.Store(1_000_000) // out of the way of ids in clientData
		c.w.Write([]byte(clientData + "\n"))
		msg, _ := c.call("tools/call", map[string]any{"name": "t", "arguments": map[string]any{}})
		if msg["result"] == nil && msg["error"] == nil {
			t.Fatalf("response without result or error: %v", msg)
		}
		if msg, _ := c.call("ping", nil); msg["result"] == nil {
			t.Fatalf("gateway stopped serving: ping got %v", msg)
		}
	})
}

// FuzzCallParams: a client's tool arguments reach the server as the
// client wrote them, every number digit for digit (never through
// float64), whatever the JSON; only the name is replaced.
func FuzzCallParams(f *testing.F) {
	for _, s := range []string{`{}`, `{"n":9007199254740993,"f":1e400,"s":"<é>","a":[-0.0,{"x":null}]}`, `{"_meta":{"progressToken":1}}`, `[]`, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		if !json.Valid([]byte(args)) || strings.TrimSpace(args) == "null" {
			return
		}
		p := &mcp.CallToolParamsRaw{Name: "prefix__tool", Arguments: json.RawMessage(args)}
		// The call path (toolCallParams) and the general one (withField).
		for _, params := range []map[string]any{toolCallParams(p, "tool"), withField(p, "name", "tool")} {
			raw, err := marshalParams(params)
			if err != nil {
				t.Fatalf("encoding params: %v", err)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if string(got["name"]) != `"tool"` {
				t.Fatalf("name = %s", got["name"])
			}
			if a, b := decodeNumbers(t, got["arguments"]), decodeNumbers(t, []byte(args)); !reflect.DeepEqual(a, b) {
				t.Fatalf("arguments changed:\n got %s\nwant %s", got["arguments"], args)
			}
		}
	})
}

// TestToolCallParamsMatchesWithField: the call path's shortcut builds
// the params withField builds, whatever the call carries.
func TestToolCallParamsMatchesWithField(t *testing.T) {
	for _, p := range []*mcp.CallToolParamsRaw{
		{Name: "s__t"},
		{Name: "s__t", Arguments: json.RawMessage(`{"n":9007199254740993,"s":"<&>"}`)},
		{Name: "s__t", Arguments: json.RawMessage(`null`)},
		{Name: "s__t", Arguments: json.RawMessage(`[1, 2]`)},
		{Name: "s__t", Meta: mcp.Meta{}, Arguments: json.RawMessage(`{}`)},
		{Name: "s__t", Meta: mcp.Meta{"progressToken": 7.0}, Arguments: json.RawMessage(`{"a":1}`)},
		{Name: "s__t", RequestState: "st", Arguments: json.RawMessage(`{"a":1}`)},
		{Name: "s__t", InputResponses: mcp.InputResponseMap{"k": &mcp.ElicitResult{Action: "accept"}}},
	} {
		fast, err := marshalParams(toolCallParams(p, "t"))
		if err != nil {
			t.Fatal(err)
		}
		slow, err := marshalParams(withField(p, "name", "t"))
		if err != nil {
			t.Fatal(err)
		}
		if a, b := decodeNumbers(t, fast), decodeNumbers(t, slow); !reflect.DeepEqual(a, b) {
			t.Errorf("%+v:\n toolCallParams %s\n withField      %s", p, fast, slow)
		}
	}
}

func decodeNumbers(t *testing.T, b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	return v
}

// FuzzCursor: a list cursor from the client decodes to a page offset that
// is never negative, and the gateway's own cursors round-trip.
func FuzzCursor(f *testing.F) {
	f.Add(encodeCursor(0), 0)
	f.Add(encodeCursor(100), 7)
	f.Add("bWNwYm94Oi0x", -1) // "mcpbox:-1"
	f.Fuzz(func(t *testing.T, s string, n int) {
		if got, err := decodeCursor(s); err == nil && got < 0 {
			t.Fatalf("decodeCursor(%q) = %d", s, got)
		}
		if n < 0 {
			return
		}
		if got, err := decodeCursor(encodeCursor(n)); err != nil || got != n {
			t.Fatalf("cursor of %d decodes to %d, %v", n, got, err)
		}
	})
}
