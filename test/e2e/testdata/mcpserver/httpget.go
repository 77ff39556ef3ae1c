package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/test/e2e/testdata/sigv4"
)

// The tools of the credential-injection tests: an HTTP(S) request through
// the sandbox's proxy (HTTPS_PROXY, HTTP_PROXY; trust from SSL_CERT_FILE,
// as every Go program on Linux) with headers that may name the server's variables,
// and reads of the server's own files and environment.

type httpGetIn struct {
	URL string `json:"url"`
	// Headers are sent with ${VAR} replaced by the server's variable VAR.
	Headers map[string]string `json:"headers,omitempty"`
	// CAFile, if set, is the only trust: the certificates in that file,
	// as a tool that ignores SSL_CERT_FILE and reads a system bundle path.
	CAFile string `json:"ca_file,omitempty"`
}

type readIn struct {
	Path string `json:"path" jsonschema:"any absolute path in the sandbox: /proc/self/environ, /run/secrets/NAME, ..."`
}

func (s *server) registerHTTPGet() {
	mcp.AddTool(s.srv, &mcp.Tool{Name: "http_get", Description: "GETs url through the proxy; returns STATUS BODY"}, httpGet)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "read_any", Description: "returns the bytes of any file the server can read, NULs as newlines"},
		func(_ context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, any, error) {
			b, err := os.ReadFile(in.Path)
			if err != nil {
				return nil, nil, err
			}
			return text(strings.ReplaceAll(string(b), "\x00", "\n")), nil, nil
		})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "s3_get", Description: "GETs url through the proxy, SigV4-signed with the signing variables it was started with (or, with presign, as a presigned URL); returns STATUS BODY"}, s3Get)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "mem_dump", Description: "writes every readable mapping of this process (/proc/self/mem) to /workspace/output/NAME; returns the bytes written"},
		func(_ context.Context, _ *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
			n, err := memDump(filepath.Join("/workspace/output", filepath.Base(in.Name)))
			return text(strconv.FormatInt(n, 10)), nil, err
		})
}

// memDump copies the readable mappings of this process to path. It holds
// the secret files it can read while it dumps: a file read by an earlier
// call may already be collected, and the test wants both what the
// environment and what the files gave the server in the dump.
func memDump(path string) (int64, error) {
	var held [][]byte
	if files, err := filepath.Glob("/run/secrets/*"); err == nil {
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				held = append(held, b)
			}
		}
	}
	defer runtime.KeepAlive(held)
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		return 0, err
	}
	defer mem.Close()
	out, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	var total int64
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1][0] != 'r' || strings.HasSuffix(line, "[vvar]") || strings.HasSuffix(line, "[vsyscall]") {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || b-a > 1<<30 {
			continue
		}
		n, _ := io.Copy(out, io.NewSectionReader(mem, int64(a), int64(b-a)))
		total += n
	}
	return total, out.Close()
}

type s3GetIn struct {
	URL     string `json:"url"`
	Presign bool   `json:"presign,omitempty"`
}

func s3Get(ctx context.Context, _ *mcp.CallToolRequest, in s3GetIn) (*mcp.CallToolResult, any, error) {
	return get(ctx, in.URL, func(r *http.Request) {
		kid, secret, token := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")
		if in.Presign {
			q := r.URL.Query()
			q.Set("X-Amz-Algorithm", "AWS4-HMAC-SHA256")
			q.Set("X-Amz-Credential", kid+"/20260101/"+sigv4.Region+"/"+sigv4.Service+"/aws4_request")
			q.Set("X-Amz-Signature", strings.Repeat("0", 64))
			r.URL.RawQuery = q.Encode()
			return
		}
		sigv4.Sign(r, kid, secret, token, time.Now())
	})
}

func httpGet(ctx context.Context, _ *mcp.CallToolRequest, in httpGetIn) (*mcp.CallToolResult, any, error) {
	var roots *x509.CertPool
	if in.CAFile != "" {
		pem, err := os.ReadFile(in.CAFile)
		if err != nil {
			return nil, nil, err
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("no certificate in %s", in.CAFile)
		}
	}
	return getTrusting(ctx, in.URL, roots, func(r *http.Request) {
		for k, v := range in.Headers {
			r.Header.Set(k, os.ExpandEnv(v))
		}
	})
}

// get GETs u through the sandbox's proxy after prepare.
func get(ctx context.Context, u string, prepare func(*http.Request)) (*mcp.CallToolResult, any, error) {
	return getTrusting(ctx, u, nil, prepare)
}

// getTrusting is get trusting roots (nil: the system's, SSL_CERT_FILE).
func getTrusting(ctx context.Context, u string, roots *x509.CertPool, prepare func(*http.Request)) (*mcp.CallToolResult, any, error) {
	// Not http.ProxyFromEnvironment: it never proxies loopback targets,
	// and the tests' services listen on the host's loopback.
	tr := &http.Transport{ForceAttemptHTTP2: true, Proxy: func(r *http.Request) (*url.URL, error) {
		p := os.Getenv("HTTP_PROXY")
		if r.URL.Scheme == "https" {
			p = os.Getenv("HTTPS_PROXY")
		}
		if p == "" {
			return nil, nil
		}
		return url.Parse(p)
	}}
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	prepare(req)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the body: %w", err)
	}
	return text(fmt.Sprintf("%d %s", resp.StatusCode, body)), nil, nil
}
