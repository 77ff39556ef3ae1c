package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/websocket"
)

// The WebSocket tool of the credential-injection tests: a wss:// client
// through the sandbox's proxy (CONNECT to HTTPS_PROXY; trust from
// SSL_CERT_FILE), as a server that streams from an API would be.

type wsEchoIn struct {
	URL string `json:"url"`
	// Headers go with the handshake, ${VAR} replaced by the variable VAR.
	Headers map[string]string `json:"headers,omitempty"`
	// Messages are sent one by one, ${VAR} replaced; each reply is read.
	Messages []string `json:"messages"`
}

func (s *server) registerWSEcho() {
	mcp.AddTool(s.srv, &mcp.Tool{Name: "ws_echo", Description: "opens a WebSocket through the proxy, sends each message and reads a reply to it; returns the replies, one a line, or where it ended"}, wsEcho)
}

func wsEcho(ctx context.Context, _ *mcp.CallToolRequest, in wsEchoIn) (*mcp.CallToolResult, any, error) {
	u, err := url.Parse(in.URL)
	if err != nil || u.Scheme != "wss" {
		return nil, nil, fmt.Errorf("want a wss:// URL: %q", in.URL)
	}
	proxy, err := url.Parse(os.Getenv("HTTPS_PROXY"))
	if err != nil || proxy.Host == "" {
		return nil, nil, fmt.Errorf("no HTTPS_PROXY")
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", proxy.Host)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host, u.Host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != 200 {
		return text(fmt.Sprintf("CONNECT %d", resp.StatusCode)), nil, nil
	}
	// Go's TLS stack reads SSL_CERT_FILE for the system roots.
	tc := tls.Client(c, &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}})
	cfg, err := websocket.NewConfig(in.URL, "https://"+u.Host)
	if err != nil {
		return nil, nil, err
	}
	cfg.Header = http.Header{}
	for k, v := range in.Headers {
		cfg.Header.Set(k, os.ExpandEnv(v))
	}
	ws, err := websocket.NewClient(cfg, tc)
	if err != nil {
		return text("handshake: " + err.Error()), nil, nil
	}
	defer ws.Close()
	var out []string
	for _, m := range in.Messages {
		if err := websocket.Message.Send(ws, os.ExpandEnv(m)); err != nil {
			out = append(out, "send: "+err.Error())
			break
		}
		var reply string
		if err := websocket.Message.Receive(ws, &reply); err != nil {
			out = append(out, "closed: "+err.Error())
			break
		}
		out = append(out, reply)
	}
	return text(strings.Join(out, "\n")), nil, nil
}
