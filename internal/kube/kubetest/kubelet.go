package kubetest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// serveKubelet serves the kubelet's container log API
// (/containerLogs/NS/POD/CONTAINER, with follow=true) on a loopback port,
// which the node reports as its kubelet endpoint, so that the API server's
// GET pods/NAME/log works as against a real kubelet. The API server does
// not verify the kubelet's certificate (no --kubelet-certificate-authority)
// and the endpoint asks none of it: loopback, test only.
func (n *Node) serveKubelet() (int, error) {
	cert, key, err := n.c.ca.issue("kubetest-kubelet", nil, true)
	if err != nil {
		return 0, err
	}
	kp, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return 0, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("the test kubelet's port: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(n.containerLogs), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}}
	n.kubelet = srv
	go srv.ServeTLS(l, "", "")
	return l.Addr().(*net.TCPAddr).Port, nil
}

// containerLogs writes a container's log; with follow=true it goes on
// writing what the container appends until the pod is gone from the node,
// the client leaves or the node stops.
func (n *Node) containerLogs(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
	if !strings.HasPrefix(r.URL.Path, "/containerLogs/") || len(parts) != 3 {
		http.NotFound(w, r)
		return
	}
	ns, pod, container := parts[0], parts[1], parts[2]
	f, err := os.Open(n.logPath(ns, pod, container))
	if err != nil {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start", container, pod), http.StatusBadRequest)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	fl, _ := w.(http.Flusher)
	follow := r.URL.Query().Get("follow") == "true"
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-n.ctx.Done():
		case <-ctx.Done():
		}
		cancel()
	}()
	buf := make([]byte, 32<<10)
	for {
		k, err := f.Read(buf)
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) || !follow {
			return
		}
		if n.run(ns, pod) == nil {
			// The pod has ended: what it wrote is all there is.
			if k, _ := f.Read(buf); k > 0 {
				w.Write(buf[:k])
				continue
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
