package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fault tools make a server misbehave for the fault tests: hang never
// answers, flood keeps writing what is not JSON-RPC, close_stdout closes
// stdout and keeps running, and egress_flood holds many half-sent
// requests open on the sandbox's egress proxy.

type floodIn struct {
	MS  int `json:"ms" jsonschema:"how long to flood, in milliseconds"`
	MiB int `json:"mib,omitempty" jsonschema:"size of every tenth line (a cut-short notification), in MiB; default 4"`
}

type egressFloodIn struct {
	Conns  int `json:"conns" jsonschema:"connections to open to the HTTP proxy"`
	HoldMS int `json:"hold_ms" jsonschema:"how long to hold them, in milliseconds, after the call returns"`
}

func (s *server) registerFaults() {
	srv := s.srv
	mcp.AddTool(srv, &mcp.Tool{Name: "hang", Description: "never returns, whatever the client does"},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			select {}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "flood", Description: "writes invalid JSON and huge lines to stdout for ms, then returns"}, s.flood)
	mcp.AddTool(srv, &mcp.Tool{Name: "close_stdout", Description: "closes stdout and keeps running"},
		func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
			s.out.mu.Lock()
			s.out.f.Close()
			s.out.mu.Unlock()
			fmt.Fprintln(os.Stderr, "mcpserver: stdout closed, still running")
			select {}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "egress_flood", Description: "opens conns connections to the HTTP proxy, sends half a request head on each and holds them for hold_ms; returns how many opened"}, egressFlood)
}

func (s *server) flood(_ context.Context, _ *mcp.CallToolRequest, in floodIn) (*mcp.CallToolResult, any, error) {
	mib := in.MiB
	if mib == 0 {
		mib = 4
	}
	if mib < 0 || mib > 64 || in.MS < 0 || in.MS > 600_000 {
		return nil, nil, fmt.Errorf("mib %d or ms %d out of range", mib, in.MS)
	}
	// A JSON-RPC notification cut short: it must be read whole to be refused.
	big := []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("f", mib<<20) + "\n")
	junk := []byte("{not JSON at all, and then some: " + strings.Repeat("\xff", 200) + "\n")
	lines, bytes := 0, 0
	for end := time.Now().Add(time.Duration(in.MS) * time.Millisecond); time.Now().Before(end); lines++ {
		l := junk
		if lines%10 == 9 {
			l = big
		}
		n, err := s.out.Write(l)
		bytes += n
		if err != nil {
			return nil, nil, err
		}
	}
	return text(fmt.Sprintf("flooded %d lines, %d bytes", lines, bytes)), nil, nil
}

// egressFlood is a slowloris against the sandbox's own proxy: every
// connection gets the start of a request head and never the end.
func egressFlood(_ context.Context, _ *mcp.CallToolRequest, in egressFloodIn) (*mcp.CallToolResult, any, error) {
	if in.Conns < 0 || in.Conns > 20000 || in.HoldMS < 0 {
		return nil, nil, fmt.Errorf("conns %d or hold_ms %d out of range", in.Conns, in.HoldMS)
	}
	u, err := url.Parse(cmpOr(os.Getenv("HTTP_PROXY"), os.Getenv("http_proxy")))
	if err != nil || u.Host == "" {
		return nil, nil, fmt.Errorf("no HTTP proxy in the environment (%v)", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for range in.Conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
			if err == nil {
				_, err = c.Write([]byte("GET http://slow.example/ HTTP/1.1\r\nHost: slow.example\r\nX-Slow: "))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if c != nil {
					c.Close()
				}
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			conns = append(conns, c)
		}()
	}
	wg.Wait()
	time.AfterFunc(time.Duration(in.HoldMS)*time.Millisecond, func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return text(fmt.Sprintf("opened %d of %d (first error: %v)", len(conns), in.Conns, firstErr)), nil, nil
}
