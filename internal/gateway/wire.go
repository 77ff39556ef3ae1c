package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// conn is a stream of JSON-RPC messages to an upstream server. The go-sdk's
// mcp.Connection (used for remote servers) satisfies it.
type conn interface {
	Read(context.Context) (jsonrpc.Message, error)
	Write(context.Context, jsonrpc.Message) error
	Close() error
}

// DefaultMaxMessage is the largest message accepted from an upstream
// server when Server.MaxMessage is zero. Larger ones are dropped whole.
const DefaultMaxMessage = 16 << 20

// writeTimeout bounds one write to an upstream's stdin: a server that stops
// reading is wedged, and its connection is closed rather than letting
// callers pile up behind it.
const writeTimeout = 30 * time.Second

// lineConn speaks newline-delimited JSON-RPC over a server's stdin and
// stdout (the MCP stdio transport). Lines that are too long or not JSON-RPC
// are dropped and reported to drop; they never end the connection.
type lineConn struct {
	r    *bufio.Reader
	w    io.Writer
	max  int
	who  string // the other end, for errors: "server NAME"
	drop func(reason string, sample []byte)
	// oversized, if set, is told the id of a request dropped for its
	// size, so that its sender can be answered rather than left waiting.
	oversized func(id jsonrpc.ID)
	// invalid, if set, is told each line that is neither a message nor a
	// malformed response, so that its sender can be answered too.
	invalid func(line []byte)

	raw    *rawFile // w without the runtime's syscall bookkeeping, when w is a non-blocking file
	wmu    sync.Mutex
	closer io.Closer // closes both directions
	once   sync.Once
}

func newLineConn(r io.Reader, w io.Writer, closer io.Closer, who string, max int, drop func(string, []byte)) *lineConn {
	if max <= 0 {
		max = DefaultMaxMessage
	}
	if f, ok := r.(*os.File); ok {
		if rf := newRawFile(f); rf != nil {
			r = rf
		}
	}
	c := &lineConn{r: bufio.NewReaderSize(r, 64<<10), w: w, max: max, who: who, drop: drop, closer: closer}
	if f, ok := w.(*os.File); ok {
		c.raw = newRawFile(f)
	}
	return c
}

// Read returns the next well-formed message. It blocks until one arrives
// or the stream ends; Close unblocks it. An oversized response whose id
// can be read from its first bytes, and a response that does not decode
// (see malformedResponse), become error responses, so the call waiting
// for it fails instead of hanging.
func (c *lineConn) Read(context.Context) (jsonrpc.Message, error) {
	for {
		line, head, tail, tooLong, err := c.readLine()
		if tooLong {
			c.drop(fmt.Sprintf("message larger than %d bytes", c.max), head)
			if c.oversized != nil {
				if id, ok := requestID(head, tail); ok {
					c.oversized(id)
				}
			}
			if id, ok := ResponseID(head, tail); ok {
				return &jsonrpc.Response{ID: id, Error: rpcError(jsonrpc.CodeInternalError, "the server's response is larger than the %d-byte message limit", c.max)}, nil
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			msg, derr := decodeMessage(line)
			// A client's id alone is neither a request nor a response:
			// it is answered as an invalid request, as over HTTP, and
			// taken as a malformed response below, so that a request
			// of ours under that id, if any, fails now.
			idOnly := derr == nil && c.invalid != nil && noMessage(msg, line)
			if derr == nil && !idOnly {
				return msg, nil
			}
			if idOnly {
				c.invalid(line)
			}
			if resp, ok := malformedResponse(c.who, line); ok {
				c.drop(resp.Error.Error(), line)
				return resp, nil
			}
			// Not derr's text: it quotes the line, unredacted.
			c.drop("not a JSON-RPC message", line)
			if c.invalid != nil && !idOnly {
				c.invalid(line)
			}
		}
		if err != nil {
			return nil, err
		}
	}
}

// headSize is how much of an oversized line is kept to find its id.
const headSize = 256

// readLine reads up to the next newline. A line longer than c.max is
// skipped to its end without being buffered; head and tail keep its first
// and last headSize bytes.
func (c *lineConn) readLine() (line, head, tail []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := c.r.ReadSlice('\n')
		switch {
		case tooLong:
			tail = append(tail, chunk...)
			tail = tail[max(0, len(tail)-headSize):]
		case len(buf)+len(chunk) > c.max:
			tooLong = true
			all := append(buf, chunk...)
			head = bytes.Clone(all[:min(len(all), headSize)])
			tail = bytes.Clone(all[max(0, len(all)-headSize):])
			buf = nil
		default:
			buf = append(buf, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return buf, head, tail, tooLong, err
	}
}

var (
	// A response that starts with its id ({"jsonrpc":"2.0","id":N,"result"...).
	headIDRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*,\s*"(?:result|error)"`)
	})
	// A response that starts with its result and ends with its id.
	headResultRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"\s*:`)
	})
	tailIDRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$`)
	})
	// The same for a request: its id before its method, or at its end.
	headReqIDRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*,\s*"method"`)
	})
	headMethodRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"method"\s*:`)
	})
)

// ResponseID reads the id of an oversized response from its first or
// last bytes, wherever the writer put it (tail may be nil when only the
// head was kept: then only an id written before the result is found).
func ResponseID(head, tail []byte) (jsonrpc.ID, bool) {
	return messageID(head, tail, headIDRE(), headResultRE())
}

// requestID is ResponseID for an oversized request.
func requestID(head, tail []byte) (jsonrpc.ID, bool) {
	return messageID(head, tail, headReqIDRE(), headMethodRE())
}

// messageID reads an id that headID finds in head, or, when head is what
// headNoID matches (the id is not first), the id that ends tail.
func messageID(head, tail []byte, headID, headNoID *regexp.Regexp) (jsonrpc.ID, bool) {
	m := headID.FindSubmatch(head)
	if m == nil && headNoID.Match(head) {
		m = tailIDRE().FindSubmatch(tail)
	}
	if m == nil {
		return jsonrpc.ID{}, false
	}
	var v any
	if json.Unmarshal(m[1], &v) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil
}

// errEncoding: a message could not be encoded (nothing was written).
var errEncoding = errors.New("encoding message")

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := encodeMessage(msg)
	if err != nil {
		return fmt.Errorf("%w: %w", errEncoding, err)
	}
	data = append(data, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.raw != nil {
		// Most messages fit at once: no deadline to set and clear.
		n := c.raw.tryWrite(data)
		if n == len(data) {
			return nil
		}
		data = data[n:]
	}
	if f, ok := c.w.(*os.File); ok {
		deadline := time.Now().Add(writeTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		if f.SetWriteDeadline(deadline) == nil {
			defer f.SetWriteDeadline(time.Time{})
		}
	}
	if _, err := c.w.Write(data); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.Close()
			return fmt.Errorf("server stopped reading its input: %w", err)
		}
		return err
	}
	return nil
}

func (c *lineConn) Close() error {
	var err error
	c.once.Do(func() { err = c.closer.Close() })
	return err
}

// rpcError is the JSON-RPC error returned to clients for gateway-side
// failures. Messages are short and user-safe; details go to the log.
func rpcError(code int64, format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// JSON-RPC error codes the gateway uses beyond the standard ones.
const (
	codeUnavailable = -32000 // the upstream server is not running
	codeTimeout     = -32001 // call_timeout expired
	codeCancelled   = -32800 // the client cancelled the request (LSP's RequestCancelled)
)

// encodeMessage is jsonrpc.EncodeMessage without its reflection: the
// envelope of a request, or of a response that is not an error, is
// written by hand, and its params or result are compacted as the go-sdk
// compacts them (json.Compact: validated, no HTML escaping). Anything
// else (an error response, a string id or method that needs escaping, a
// payload that is not valid JSON) goes to the go-sdk's encoder, so the
// bytes and the errors stay the go-sdk's; TestEncodeMessageMatchesSDK
// and FuzzEncodeMessage hold it to them.
func encodeMessage(msg jsonrpc.Message) ([]byte, error) {
	var id jsonrpc.ID
	var method string
	var payload json.RawMessage
	field := ""
	switch m := msg.(type) {
	case *jsonrpc.Request:
		id, method, payload, field = m.ID, m.Method, m.Params, `,"params":`
	case *jsonrpc.Response:
		if m.Error != nil {
			return jsonrpc.EncodeMessage(msg)
		}
		id, payload, field = m.ID, m.Result, `,"result":`
	default:
		return jsonrpc.EncodeMessage(msg)
	}
	if !plainString(method) {
		return jsonrpc.EncodeMessage(msg)
	}
	buf := make([]byte, 0, len(payload)+len(method)+48)
	buf = append(buf, `{"jsonrpc":"2.0"`...)
	switch v := id.Raw().(type) {
	case nil:
	case int64:
		buf = append(buf, `,"id":`...)
		buf = strconv.AppendInt(buf, v, 10)
	case string:
		if !plainString(v) {
			return jsonrpc.EncodeMessage(msg)
		}
		buf = append(buf, `,"id":"`...)
		buf = append(buf, v...)
		buf = append(buf, '"')
	default:
		return jsonrpc.EncodeMessage(msg)
	}
	if method != "" {
		buf = append(buf, `,"method":"`...)
		buf = append(buf, method...)
		buf = append(buf, '"')
	}
	if len(payload) > 0 {
		buf = append(buf, field...)
		out := bytes.NewBuffer(buf)
		if json.Compact(out, payload) != nil {
			return jsonrpc.EncodeMessage(msg) // its error
		}
		buf = out.Bytes()
	}
	return append(buf, '}'), nil
}

// plainString reports whether s is written in JSON as it is: printable
// ASCII without quotes, backslashes or the characters encoding/json
// escapes.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
