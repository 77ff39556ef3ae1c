package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time this process has used (user and system): on a
// shared machine a call's CPU cost holds better than its wall time. In
// process it counts the test's client and server as well as the gateway.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

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
	cpu0 := cpuTime(b)
	for b.Loop() {
		c.call("tools/call", map[string]any{"name": "t", "arguments": map[string]any{"x": 1}})
	}
	reportCPU(b, cpu0)
}

func BenchmarkCall1MiB(b *testing.B) {
	c := benchGateway(b, fmt.Sprintf(`{"content":[{"type":"text","text":%q}]}`, strings.Repeat("abcdefgh", 1<<17)))
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for b.Loop() {
		c.call("tools/call", map[string]any{"name": "t"})
	}
}

// BenchmarkCheckPOST: what reading a POST before the SDK (checkPOST)
// adds to a small call, against the handler behind it alone, in one
// run: "checked" minus "handler" is its cost per request.
func BenchmarkCheckPOST(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","arguments":{"text":"hi"},` + modernMeta + `}}`
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	var g Gateway
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"handler", next}, {"checked", g.checkPOST(4<<20, next)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, EndpointPath, strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Accept", "application/json, text/event-stream")
				r.Header.Set("MCP-Protocol-Version", ModernVersion)
				c.h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}
