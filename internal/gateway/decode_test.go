package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeSamples are messages and near-messages whose decoding by the
// gateway must match the go-sdk's, error for error.
var decodeSamples = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ping"}}}`,
	`{"jsonrpc":"2.0","id":"a-b","method":"ping"}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":7,"method":""}`,
	`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"pong"}]}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no such method","data":{"x":1}}}`,
	`{"jsonrpc":"2.0","id":7,"result":null}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
	`{"id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","ID":1,"Method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","method":"ping"}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`,
	`{"jsonrpc":"2.0","id":"a\udc00\ud800b","method":"ping"}`,
	`{"jsonrpc":"2.0","id":"\ud83d\ude00 \ufffd \\ud800","method":"ping"}`,
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
	`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":-9007199254740992,"result":{}}`,
	`{"jsonrpc":"2.0","id":9007199254740991,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":2.0,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":7}`,
	`{"jsonrpc":"2.0","id":1,"method":"a\u0000b\"c"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"} trailing`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":[1,2,3]}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":1}}`,
	`{"jsonrpc":"2.0","id":1,"error":null,"result":{}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
	`null`, `"2.0"`, `{}`, ``, `{`, `}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":"` + strings.Repeat("[", 2000) + `"}`,
}

func TestDecodeMessageMatchesSDK(t *testing.T) {
	for _, s := range decodeSamples {
		checkDecode(t, []byte(s))
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, s := range decodeSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecode(t, data) })
}

// checkDecode fails unless decodeMessage and the go-sdk agree on data:
// both refuse it, or both return the same message.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	want, werr := jsonrpc.DecodeMessage(append([]byte(nil), data...))
	got, gerr := decodeMessage(append([]byte(nil), data...))
	if errors.Is(gerr, errInexactID) {
		// The one difference: refused where the go-sdk changes the id.
		if raw := scanTop(data).id; len(raw) > 0 && raw[0] == '"' {
			var m struct{ ID string }
			if exactString(raw) || json.Unmarshal(data, &m) != nil || !strings.ContainsRune(m.ID, utf8.RuneError) {
				t.Fatalf("decoding %q: refused the exact id %s", data, raw)
			}
			return
		}
		var m struct{ ID json.Number }
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("decoding %q: refused for its id, which is not a number: %v", data, err)
		}
		if n, err := strconv.ParseInt(string(m.ID), 10, 64); err == nil && n < 1<<53 && n > -(1<<53) {
			t.Fatalf("decoding %q: refused the exact id %s", data, m.ID)
		}
		return
	}
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("decoding %q: go-sdk error %v, gateway error %v", data, werr, gerr)
	}
	if werr != nil {
		return
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(jsonrpc.ID{})); d != "" {
		t.Fatalf("decoding %q: gateway differs from the go-sdk (-sdk +gateway):\n%s", data, d)
	}
}

// BenchmarkDecodeMessage: the go-sdk's decoding of a small call against
// the gateway's (allocations are the point).
func BenchmarkDecodeMessage(b *testing.B) {
	msg := []byte(decodeSamples[0])
	for _, d := range []struct {
		name string
		f    func([]byte) (jsonrpc.Message, error)
	}{{"sdk", jsonrpc.DecodeMessage}, {"gateway", decodeMessage}} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.f(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
