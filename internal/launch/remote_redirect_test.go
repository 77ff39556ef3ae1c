package launch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"mcpbox/internal/gateway"
)

// TestRemoteRedirectKeepsHeaders: a Streamable HTTP server that
// redirects to another origin does not get the configured header (whose
// value is a secret) sent there; the transport sets it on every request
// it makes, so a followed redirect would carry it.
func TestRemoteRedirectKeepsHeaders(t *testing.T) {
	const key = "remote-api-key-0123456789"
	t.Setenv("MCPBOX_TEST_REDIRECT_KEY", key)
	var leaked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") == key {
			leaked.Add(1)
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer other.Close()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer hs.Close()
	l := NewRemote(RemoteOptions{URL: hs.URL, Headers: map[string]string{"X-Api-Key": "env:MCPBOX_TEST_REDIRECT_KEY"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := l.Start(ctx, gateway.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop()
	id, _ := jsonrpc.MakeID(float64(1))
	in.(*remoteInstance).conn.Write(ctx, &jsonrpc.Request{ID: id, Method: "initialize", Params: []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)})
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the configured header followed a redirect to another origin %d times", n)
	}
}

// TestRemoteBoundsAnswers: a remote server that answers with an endless
// JSON body fails its connection once the message limit is passed; the
// gateway does not read (and hold) it all.
func TestRemoteBoundsAnswers(t *testing.T) {
	const sent = 256 << 20
	var wrote atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		chunk := []byte(`{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("A", 64<<10))
		for wrote.Load() < sent {
			n, err := w.Write(chunk)
			wrote.Add(int64(n))
			if err != nil {
				return
			}
			chunk = []byte(strings.Repeat("A", 64<<10))
		}
	}))
	defer hs.Close()
	l := NewRemote(RemoteOptions{URL: hs.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	in, err := l.Start(ctx, gateway.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop()
	c := in.(*remoteInstance).conn
	id, _ := jsonrpc.MakeID(float64(1))
	c.Write(ctx, &jsonrpc.Request{ID: id, Method: "initialize", Params: []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)})
	if m, err := c.Read(ctx); err == nil {
		t.Errorf("read a message from an endless answer: %T", m)
	}
	if n := wrote.Load(); n >= sent {
		t.Errorf("the server wrote all %d bytes of its answer: the gateway read past its %d-byte limit", n, gateway.DefaultMaxMessage)
	}
}
