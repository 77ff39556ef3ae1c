package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// encodeSamples are messages whose encoding by the gateway must match
// the go-sdk's, byte for byte and error for error.
func encodeSamples() []jsonrpc.Message {
	id := func(v any) jsonrpc.ID {
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			panic(err)
		}
		return id
	}
	return []jsonrpc.Message{
		&jsonrpc.Request{ID: id(float64(1)), Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{"text":"ping"}}`)},
		&jsonrpc.Request{ID: id(float64(-9007199254740993)), Method: "ping"},
		&jsonrpc.Request{ID: id("a-b"), Method: "ping", Params: json.RawMessage(`{ "x" : [ 1 , 2 ] , "s":"<&>\u2028" }`)},
		&jsonrpc.Request{ID: id("a\"b<"), Method: "ping"},
		&jsonrpc.Request{ID: id(""), Method: "ping"},
		&jsonrpc.Request{Method: "notifications/initialized"},
		&jsonrpc.Request{Method: "notifications/progress", Params: json.RawMessage(`null`)},
		&jsonrpc.Request{ID: id(float64(2)), Method: ""},
		&jsonrpc.Request{ID: id(float64(2)), Method: "a\u0000b\"c<é>"},
		&jsonrpc.Request{ID: id(float64(2)), Method: "ping", Params: json.RawMessage(`{"x":`)},
		&jsonrpc.Request{ID: id(float64(2)), Method: "ping", Params: json.RawMessage(`{} {}`)},
		&jsonrpc.Response{ID: id(float64(7)), Result: json.RawMessage(`{"content":[{"type":"text","text":"pong"}]}`)},
		&jsonrpc.Response{ID: id(float64(7)), Result: json.RawMessage("{\n\t\"a\": \"\\u003c\xe2\x80\xa8\"\n}")},
		&jsonrpc.Response{ID: id(float64(7))},
		&jsonrpc.Response{ID: id("x"), Result: json.RawMessage(`null`)},
		&jsonrpc.Response{Result: json.RawMessage(`{}`)},
		&jsonrpc.Response{ID: id(float64(7)), Result: json.RawMessage(`nope`)},
		&jsonrpc.Response{ID: id(float64(7)), Error: &jsonrpc.Error{Code: -32601, Message: "no such method"}},
		&jsonrpc.Response{ID: id(float64(7)), Error: errors.New("plain")},
	}
}

func TestEncodeMessageMatchesSDK(t *testing.T) {
	for _, m := range encodeSamples() {
		checkEncode(t, m)
	}
}

func FuzzEncodeMessage(f *testing.F) {
	f.Add(true, 1.0, "", "tools/call", []byte(`{"a":1}`))
	f.Add(false, 0.0, "x<", "", []byte(`[1, 2]`))
	f.Fuzz(func(t *testing.T, request bool, n float64, s, method string, payload []byte) {
		var id jsonrpc.ID
		switch {
		case s != "":
			id, _ = jsonrpc.MakeID(s)
		case n != 0:
			id, _ = jsonrpc.MakeID(n)
		}
		if request {
			checkEncode(t, &jsonrpc.Request{ID: id, Method: method, Params: payload})
		} else {
			checkEncode(t, &jsonrpc.Response{ID: id, Result: payload})
		}
	})
}

// checkEncode fails unless encodeMessage and the go-sdk agree on m.
func checkEncode(t *testing.T, m jsonrpc.Message) {
	t.Helper()
	got, gerr := encodeMessage(m)
	want, werr := jsonrpc.EncodeMessage(m)
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
		t.Fatalf("%+v: error %v, the go-sdk's %v", m, gerr, werr)
	}
	if string(got) != string(want) {
		t.Fatalf("%+v:\n got %s\nwant %s", m, got, want)
	}
}

func BenchmarkEncodeMessage(b *testing.B) {
	id, _ := jsonrpc.MakeID(float64(12))
	m := &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{"text":"ping"}}`)}
	for b.Loop() {
		if _, err := encodeMessage(m); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMarshalCallParamsMatchesEncoder: the hand-written params of a plain
// tools/call are the encoder's bytes, and what it cannot write the
// encoder gets.
func TestMarshalCallParamsMatchesEncoder(t *testing.T) {
	for _, m := range []map[string]any{
		{"name": "t"},
		{"name": "t", "arguments": json.RawMessage(`{"x":1}`)},
		{"name": "t", "arguments": json.RawMessage(` { "x" : [1, 2], "s":"<a & b>\u003c" } `)},
		{"name": "t", "arguments": json.RawMessage(`9007199254740993`)},
		{"name": "t", "arguments": json.RawMessage(`{"x":`)},
		{"name": "t", "arguments": json.RawMessage(nil)},
		{"name": "t", "arguments": map[string]any{"x": 1}},
		{"name": "a<b", "arguments": json.RawMessage(`{}`)},
		{"name": "q\"", "arguments": json.RawMessage(`{}`)},
		{"name": "é", "arguments": json.RawMessage(`{}`)},
		{"name": "t", "x": json.RawMessage(`{}`)},
		{"name": "t", "arguments": json.RawMessage(`{}`), "_meta": map[string]any{"progressToken": 1}},
		{"name": 5},
		{},
	} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		encErr := enc.Encode(m)
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		got, err := marshalParams(m)
		if (err != nil) != (encErr != nil) || (err == nil && !bytes.Equal(got, want)) {
			t.Errorf("%v: got %s, %v; the encoder %s, %v", m, got, err, want, encErr)
		}
	}
}
