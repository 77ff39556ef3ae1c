package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// The init serves proxyAddr on the sandbox's loopback and splices each
// connection to the proxy socket, so programs use it through the usual
// HTTP_PROXY variables; each forward rule gets a listener of its own whose
// connections are tunnelled with a CONNECT to the rule's fixed target. The
// proxy decides; the init only carries bytes.

// forwardSpec is one network.forward rule as the init sees it.
type forwardSpec struct {
	Listen string `json:"listen"` // loopback address inside the sandbox
	To     string `json:"to"`     // host:port the proxy connects to
}

// serveEgress starts the proxy listener and the forward listeners. They
// live as long as the init does.
func serveEgress(forwards []forwardSpec) error {
	ln, err := net.Listen("tcp", proxyAddr)
	if err != nil {
		return fmt.Errorf("listening on %s for the egress proxy: %w", proxyAddr, err)
	}
	go acceptLoop(ln, func(c net.Conn) { splice(c, "") })
	for _, f := range forwards {
		fl, err := net.Listen("tcp", f.Listen)
		if err != nil {
			return fmt.Errorf("listening on %s for forward to %s: %w", f.Listen, f.To, err)
		}
		to := f.To
		go acceptLoop(fl, func(c net.Conn) { splice(c, to) })
	}
	return nil
}

// acceptRetry is the pause after a failed accept.
const acceptRetry = 50 * time.Millisecond

// acceptLoop serves ln until it is closed. Other accept errors (EMFILE
// when the workload floods its own proxy, ENFILE, ENOBUFS) pass as
// connections end: quitting on them would leave the sandbox without
// egress for the rest of its life.
func acceptLoop(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(acceptRetry)
			continue
		}
		go handle(c)
	}
}

// splice carries c to the proxy socket; with a tunnel target, it first
// asks the proxy for a CONNECT to it and passes only the tunnel on.
func splice(c net.Conn, tunnel string) {
	defer c.Close()
	p, err := net.DialTimeout("unix", proxySocket, 10*time.Second)
	if err != nil {
		return
	}
	defer p.Close()
	var fromProxy io.Reader = p
	if tunnel != "" {
		br, err := connect(p, tunnel)
		if err != nil {
			return
		}
		fromProxy = br
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(p, c)
		closeWrite(p)
	}()
	_, _ = io.Copy(c, fromProxy)
	closeWrite(c)
	wg.Wait()
}

// connect sends a CONNECT for target on p and reads the proxy's answer;
// the returned reader holds any bytes that followed it.
func connect(p net.Conn, target string) (*bufio.Reader, error) {
	_ = p.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(p, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return nil, err
	}
	br := bufio.NewReader(p)
	status, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if f := strings.Fields(status); len(f) < 2 || f[1] != "200" {
		return nil, fmt.Errorf("proxy refused the forward to %s: %s", target, strings.TrimSpace(status))
	}
	for { // the rest of the response head
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line == "\r\n" || line == "\n" {
			break
		}
	}
	_ = p.SetDeadline(time.Time{})
	return br, nil
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
