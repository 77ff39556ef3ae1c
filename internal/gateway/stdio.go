package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport is the downstream stdio transport: newline-delimited
// JSON-RPC like the SDK's IOTransport, except that a raw result (see
// rawResultValue) is written as it came from the server.
type stdioTransport struct {
	r     io.ReadCloser
	w     io.WriteCloser
	swaps *swapTable
	log   *slog.Logger
}

func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &stdioConn{t: t}
	c.lines = newLineConn(t.r, t.w, closeBoth{t.r, t.w}, "the client", DefaultMaxMessage, func(reason string, _ []byte) {
		t.log.Warn("dropped a message from the client", "reason", reason)
	})
	return c, nil
}

type stdioConn struct {
	t     *stdioTransport
	lines *lineConn
	wmu   sync.Mutex
}

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) { return c.lines.Read(ctx) }

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
		if raw, ok := c.t.swaps.take(resp.Result); ok {
			id, err := json.Marshal(resp.ID.Raw())
			if err != nil {
				return fmt.Errorf("encoding id: %w", err)
			}
			c.wmu.Lock()
			defer c.wmu.Unlock()
			// One write, so that a message is never torn.
			buf := make([]byte, 0, len(raw)+len(id)+40)
			buf = append(buf, `{"jsonrpc":"2.0","id":`...)
			buf = append(buf, id...)
			buf = append(buf, `,"result":`...)
			buf = append(buf, raw...)
			buf = append(buf, "}\n"...)
			_, err = c.t.w.Write(buf)
			return err
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.lines.Write(ctx, msg)
}

func (c *stdioConn) Close() error      { return c.lines.Close() }
func (c *stdioConn) SessionID() string { return "" }

type closeBoth struct {
	r io.Closer
	w io.Closer
}

func (c closeBoth) Close() error {
	c.r.Close()
	return c.w.Close()
}

// swapMin is the smallest result worth a placeholder.
const swapMin = 4 << 10

// swapTable holds raw results between the SDK's marshalling (which gets a
// placeholder) and the transport's write (which swaps it back).
// A server could answer with a result that looks like a placeholder; the
// key holds a random nonce of the session, so it cannot name another's.
type swapTable struct {
	mu   sync.Mutex
	key  string // {"mcpbox-raw-result-NONCE":
	next int64
	m    map[int64]json.RawMessage
}

func newSwapTable() *swapTable {
	return &swapTable{key: `{"mcpbox-raw-result-` + rand.Text() + `":`, m: map[int64]json.RawMessage{}}
}

func (s *swapTable) put(raw json.RawMessage) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.m[s.next] = raw
	return []byte(s.key + strconv.FormatInt(s.next, 10) + "}")
}

// take returns the raw result a placeholder stands for.
func (s *swapTable) take(placeholder json.RawMessage) (json.RawMessage, bool) {
	if s == nil {
		return nil, false
	}
	rest, ok := bytes.CutPrefix(placeholder, []byte(s.key))
	if !ok {
		return nil, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSuffix(rest, []byte("}"))), 10, 64)
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.m[n]
	delete(s.m, n)
	return raw, ok
}
