package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// benchGateway serves a raw upstream that answers tools/call with result,
// and returns a client for it. The numbers are the gateway's own cost
// (in-process, no sandbox); the e2e benchmarks compare with direct runs.
func benchGateway(b *testing.B, result string) *rawClient {
	launch, _ := rawLauncher(b, func(s *rawServer, msg map[string]any) {
		if msg["method"] == "tools/call" {
			s.reply(msg, result)
		}
	})
	gw, err := New([]*Server{{Name: "raw", Launch: launch, Allow: []string{"*"}}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gw.Close() })
	return newRawClient(b, gw)
}

func BenchmarkCallSmall(b *testing.B) {
	c := benchGateway(b, `{"content":[{"type":"text","text":"pong"}]}`)
	b.ResetTimer()
	for b.Loop() {
		c.call("tools/call", map[string]any{"name": "t", "arguments": map[string]any{"x": 1}})
	}
}

func BenchmarkCall1MiB(b *testing.B) {
	c := benchGateway(b, fmt.Sprintf(`{"content":[{"type":"text","text":%q}]}`, strings.Repeat("abcdefgh", 1<<17)))
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for b.Loop() {
		c.call("tools/call", map[string]any{"name": "t"})
	}
}
