package podagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/internal/gateway"
)

// StartRequest is what the gateway sends to /v1/start: the server's
// secrets, which reach the pod only this way (never through the pod spec,
// so never etcd).
type StartRequest struct {
	// Env is added to the server's environment (over the agent's own).
	Env map[string]string `json:"env,omitempty"`
	// Files maps a file name (one path element) to its content, written
	// 0400 under the agent's SecretsDir before the server starts.
	Files map[string][]byte `json:"files,omitempty"`
	// Proxy, if set, is the egress proxy the agent fronts for the server
	// (egress.go): the server's HTTP_PROXY, HTTPS_PROXY (and lower case)
	// name the agent's loopback listener, over Env's.
	Proxy *Proxy `json:"proxy,omitempty"`
}

// ErrStreamEnded is the error of a connection's Read once the agent's
// event stream ended: the server or its pod is gone.
var ErrStreamEnded = errors.New("the pod agent's event stream ended")

// Connect starts the server of the pod podName at addr (host:port) with
// start's secrets (POST /v1/start, accepted once per pod) and returns a
// connection to it: the go-sdk's Streamable HTTP client for what the
// gateway sends, merged with the event stream the agent sends the
// server's notifications and requests on. Every request goes over mutual
// TLS (ca.ClientTLS(podName)); a pod whose certificate does not name
// podName gets nothing, its secrets least of all.
func Connect(ctx context.Context, addr, podName string, ca *CA, start StartRequest) (mcp.Connection, error) {
	return ConnectMax(ctx, addr, podName, ca, start, 0)
}

// ConnectMax is Connect with a message size limit: maxMessage bytes (zero:
// DefaultMaxMessage) for each message from the agent.
func ConnectMax(ctx context.Context, addr, podName string, ca *CA, start StartRequest, maxMessage int) (mcp.Connection, error) {
	return ConnectWith(ctx, addr, podName, ca, start, ConnectOptions{MaxMessage: maxMessage})
}

// ConnectOptions are Connect's options.
type ConnectOptions struct {
	// MaxMessage bounds each message from the agent; zero:
	// DefaultMaxMessage.
	MaxMessage int
	// Renew, with a StartRequest.Proxy, replaces the pod's egress proxy
	// token while the connection lives; nil: never.
	Renew *Renewal
}

// Renewal is how a connection renews its pod's egress proxy token: every
// Every it asks Token for a new one and posts it to the agent
// (/v1/proxy-token) over the connection's mutual TLS; a failure is
// reported to Failed and tried again after Retry. The caller picks Every
// well inside a token's life, so that a few failures in a row still
// leave the pod its egress.
type Renewal struct {
	Every, Retry time.Duration
	Token        func() (string, error)
	Failed       func(error)
}

// ConnectWith is Connect with options.
func ConnectWith(ctx context.Context, addr, podName string, ca *CA, start StartRequest, o ConnectOptions) (mcp.Connection, error) {
	maxMessage := o.MaxMessage
	if !podNameRE().MatchString(podName) {
		return nil, fmt.Errorf("pod name %q is not a DNS label", podName)
	}
	if maxMessage <= 0 {
		maxMessage = DefaultMaxMessage
	}
	tr := &http.Transport{
		TLSClientConfig:     ca.ClientTLS(podName),
		ForceAttemptHTTP2:   true,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        4,
		IdleConnTimeout:     90 * time.Second,
		// A pod that vanishes (node lost, network cut) is noticed.
		// Every request waits for a stream of the one connection made
		// at start rather than dial another past the agent's stream
		// limit: the pod's certificate (DefaultPodTTL) is checked at
		// that handshake only, so a pod that runs longer than it keeps
		// its gateway. The connection's end ends the event stream, and
		// with it the server (a new pod gets a new certificate).
		HTTP2: &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second,
			StrictMaxConcurrentRequests: true},
	}
	// The pod is not trusted: a redirect would have the gateway send the
	// start's secrets or its messages wherever the pod said (plain HTTP
	// included), and the go-sdk reads a JSON answer whole.
	client := &http.Client{Transport: gateway.BoundedBodies(tr, int64(maxMessage)+1024, "pod"), CheckRedirect: noRedirect}
	base := "https://" + addr
	if err := postStart(ctx, client, base+"/v1/start", start); err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("starting pod %s: %w", podName, err)
	}
	c, err := attach(ctx, client, base+"/mcp", maxMessage)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("connecting to pod %s: %w", podName, err)
	}
	c.transport = tr
	if r := o.Renew; r != nil && start.Proxy != nil && r.Every > 0 && r.Token != nil {
		go c.renew(client, base+"/v1/proxy-token", *r)
	}
	return c, nil
}

// renew posts a new token every r.Every (r.Retry after a failure) until
// the connection ends.
func (c *conn) renew(client *http.Client, url string, r Renewal) {
	if r.Retry <= 0 || r.Retry > r.Every {
		r.Retry = r.Every
	}
	wait := r.Every
	for {
		t := time.NewTimer(wait)
		select {
		case <-c.failed:
			t.Stop()
			return
		case <-t.C:
		}
		err := c.postToken(client, url, r)
		if err == nil {
			wait = r.Every
			continue
		}
		if r.Failed != nil {
			r.Failed(err)
		}
		wait = r.Retry
	}
}

// postToken sends one new token; the request ends with the connection.
func (c *conn) postToken(client *http.Client, url string, r Renewal) error {
	tok, err := r.Token()
	if err != nil {
		return err
	}
	body, err := json.Marshal(TokenRequest{Token: tok})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-c.failed:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("renewing the egress proxy token: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("renewing the egress proxy token: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// StartJob starts the job of a pod's run-once agent (Config.Once: an
// install) at addr with start's env and files, over mutual TLS as
// Connect does; it returns once the agent accepted the start. The job's
// end is the container's: the caller watches the pod.
func StartJob(ctx context.Context, addr, podName string, ca *CA, start StartRequest) error {
	if !podNameRE().MatchString(podName) {
		return fmt.Errorf("pod name %q is not a DNS label", podName)
	}
	tr := &http.Transport{
		TLSClientConfig:     ca.ClientTLS(podName),
		ForceAttemptHTTP2:   true,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: gateway.BoundedBodies(tr, 64<<10, "pod"), CheckRedirect: noRedirect}
	if err := postStart(ctx, client, "https://"+addr+"/v1/start", start); err != nil {
		return fmt.Errorf("starting the install of pod %s: %w", podName, err)
	}
	return nil
}

func postStart(ctx context.Context, client *http.Client, url string, start StartRequest) error {
	body, err := json.Marshal(start)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// noRedirect refuses every redirect: the agent never sends one.
func noRedirect(r *http.Request, _ []*http.Request) error {
	return fmt.Errorf("the pod redirected to %s: refused", r.URL.Redacted())
}

// conn is the connection Connect returns.
type conn struct {
	inner     mcp.Connection
	transport *http.Transport
	in        chan jsonrpc.Message
	cancel    context.CancelFunc
	closeOnce sync.Once

	failOnce sync.Once
	failed   chan struct{}
	err      error // set before failed closes
}

// attach opens the event stream (GET), waiting for its headers, and the
// go-sdk client connection for the rest.
func attach(ctx context.Context, client *http.Client, url string, maxMessage int) (*conn, error) {
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client,
		// The agent keeps no events to resume from, and the event stream is
		// this connection's own.
		MaxRetries: -1, DisableStandaloneSSE: true, MaxEventSize: maxMessage + 1024}
	inner, err := t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &conn{inner: inner, in: make(chan jsonrpc.Message, 16), cancel: cancel, failed: make(chan struct{})}
	req, err := http.NewRequestWithContext(lctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	stop := context.AfterFunc(ctx, cancel) // ctx bounds the wait for headers only
	resp, err := client.Do(req)
	if !stop() {
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		return nil, fmt.Errorf("opening the event stream: %w", context.Cause(ctx))
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("opening the event stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("opening the event stream: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	go c.readEvents(resp.Body, maxMessage)
	go c.readInner(lctx)
	return c, nil
}

// readEvents delivers the event stream's messages until it ends, which
// ends the connection.
func (c *conn) readEvents(body io.ReadCloser, maxMessage int) {
	defer body.Close()
	err := scanEvents(body, maxMessage, func(data []byte) error {
		msg, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			return fmt.Errorf("decoding an event: %w", err)
		}
		select {
		case c.in <- msg:
			return nil
		case <-c.failed:
			return c.err
		}
	})
	if err == nil {
		err = io.EOF
	}
	c.fail(fmt.Errorf("%w: %w", ErrStreamEnded, err))
}

// readInner delivers the responses read by the go-sdk connection.
func (c *conn) readInner(ctx context.Context) {
	for {
		msg, err := c.inner.Read(ctx)
		if err != nil {
			c.fail(err)
			return
		}
		if r, ok := msg.(*jsonrpc.Response); ok && terminated(r) {
			go c.deliverTerminated(r)
			continue
		}
		select {
		case c.in <- msg:
		case <-c.failed:
			return
		}
	}
}

// terminatedWait is how long the go-sdk's "request terminated without
// response" waits for the event stream to end too.
const terminatedWait = 2 * time.Second

// terminated reports whether r is the go-sdk's own answer to a call whose
// POST ended without one (not an error the server sent).
func terminated(r *jsonrpc.Response) bool {
	var wire *jsonrpc.Error
	return r.Error != nil && !errors.As(r.Error, &wire) && r.Error.Error() == "request terminated without response"
}

// deliverTerminated passes r on unless the event stream ends within
// terminatedWait: a call's POST ends without an answer when the server
// exits, a moment before the agent does, and the call should fail with
// the connection's end, which the gateway describes (the exit status),
// not with this.
func (c *conn) deliverTerminated(r *jsonrpc.Response) {
	select {
	case <-c.failed:
		return
	case <-time.After(terminatedWait):
	}
	select {
	case c.in <- r:
	case <-c.failed:
	}
}

func (c *conn) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		close(c.failed)
	})
}

// Read returns the next message from the pod: responses and the server's
// own messages. Messages that arrived before the connection failed are
// returned first.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	default:
	}
	select {
	case m := <-c.in:
		return m, nil
	case <-c.failed:
		return nil, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write sends msg to the server.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	select {
	case <-c.failed:
		return c.err
	default:
	}
	return c.inner.Write(ctx, msg)
}

// errClosed is a connection's error once Close ended it.
var errClosed = errors.New("connection closed")

// Close ends the connection; the server keeps running until its pod goes.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.fail(errClosed)
		c.inner.Close()
		c.cancel()
		if c.transport != nil {
			c.transport.CloseIdleConnections()
		}
	})
	return nil
}

// Ended reports whether the connection ended on its own (the agent's
// event stream ended or a read failed: the server or its pod is gone, or
// the way to it) before it was closed, and with what error.
func (c *conn) Ended() (bool, error) {
	select {
	case <-c.failed:
		return c.err != errClosed, c.err
	default:
		return false, nil
	}
}

// SessionID is empty: the agent keeps no sessions.
func (c *conn) SessionID() string { return "" }

// scanEvents calls fn with the data of each server-sent event on r, of at
// most max bytes, until r ends (nil) or fails.
func scanEvents(r io.Reader, max int, fn func([]byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	has := false
	for {
		line, _, tooLong, err := readLine(br, max+len("data: \r\n"))
		if tooLong {
			return fmt.Errorf("an event larger than %d bytes", max)
		}
		if err != nil && len(line) == 0 {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if has {
				if err := fn(data); err != nil {
					return err
				}
			}
			data, has = data[:0], false
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(field) == "data" {
				if has {
					data = append(data, '\n')
				}
				if len(data)+len(value) > max {
					return fmt.Errorf("an event larger than %d bytes", max)
				}
				data, has = append(data, value...), true
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
