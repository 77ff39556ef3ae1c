package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exporter posts spans to an OTLP/HTTP collector (protobuf), configured
// by the OTEL_EXPORTER_OTLP_* variables as the specification says (and
// as go.opentelemetry.io/otel's otlptracehttp reads them, which mcpbox
// used before; that package pulls in gRPC, which mcpbox does not speak):
// ENDPOINT, HEADERS, TIMEOUT, COMPRESSION, CERTIFICATE,
// CLIENT_CERTIFICATE and CLIENT_KEY, each with its TRACES_ form, which
// wins. Failed exports are retried as otlptracehttp does: on 429, 502,
// 503 and 504 (honouring Retry-After) and on transport errors, with
// backoff from 5 s up to 30 s, for at most a minute.
type exporter struct {
	url   string
	shown string // url for errors: without a password

	headers  map[string]string
	gzip     bool
	timeout  time.Duration
	client   *http.Client
	maxRetry time.Duration // total time spent retrying one export
	backoff  time.Duration // first wait between tries

	mu     sync.Mutex
	closed bool // guarded by mu
}

// The retry and time-out defaults (otlptracehttp's and the
// specification's).
const (
	defaultTimeout = 10 * time.Second
	retryInitial   = 5 * time.Second
	retryMax       = 30 * time.Second
	retryElapsed   = time.Minute
)

// envGetter reads the variable name with prefix OTEL_EXPORTER_OTLP_,
// its TRACES_ form first.
func envGetter(getenv func(string) string) func(name string) string {
	return func(name string) string {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
			return v
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name))
	}
}

// newExporter configures an exporter from the environment.
func newExporter(getenv func(string) string) (*exporter, error) {
	env := envGetter(getenv)
	e := &exporter{url: endpoint(getenv), timeout: defaultTimeout, maxRetry: retryElapsed, backoff: retryInitial}
	u, err := url.Parse(e.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("the OTLP endpoint is not an http(s) URL")
	}
	e.shown = u.Redacted()
	if h := env("HEADERS"); h != "" {
		if e.headers, err = parseHeaders(h); err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %w", err)
		}
	}
	if t := env("TIMEOUT"); t != "" {
		ms, err := strconv.ParseInt(t, 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT=%q: not a number of milliseconds", t)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch c := env("COMPRESSION"); c {
	case "", "none":
	case "gzip":
		e.gzip = true
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION=%q: gzip or none", c)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if ca := env("CERTIFICATE"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("reading OTEL_EXPORTER_OTLP_CERTIFICATE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE %s: no PEM certificate", ca)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	if cert, key := env("CLIENT_CERTIFICATE"), env("CLIENT_KEY"); cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("loading OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY: %w", err)
		}
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{}
		}
		tr.TLSClientConfig.Certificates = []tls.Certificate{pair}
	}
	e.client = &http.Client{Transport: tr, CheckRedirect: sameOrigin}
	return e, nil
}

// errOtherOrigin refuses a redirect off the endpoint's origin.
var errOtherOrigin = errors.New("the collector redirected to another origin; not followed")

// sameOrigin follows a redirect only within the endpoint's scheme, host
// and port: net/http would carry OTEL_EXPORTER_OTLP_HEADERS (API keys)
// to any other origin too, stripping only Authorization and cookies.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return errOtherOrigin
	}
	return nil
}

// parseHeaders parses the W3C baggage-like list key=value,key=value, the
// values percent-encoded.
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for part := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, errors.New("an entry is not key=value")
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("the value of %s: %w", k, err)
		}
		h[k] = val
	}
	return h, nil
}

// ExportSpans posts spans as one request, retrying as documented on the
// type, within the time-out.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed || len(spans) == 0 {
		return nil
	}
	body := encodeRequest(spans)
	if e.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
	}
	start, wait := time.Now(), e.backoff
	for {
		retry, after, err := e.post(ctx, body)
		if err == nil || !retry {
			return err
		}
		wait = max(wait, after)
		if time.Since(start)+wait > e.maxRetry {
			return fmt.Errorf("exporting spans (gave up after %s): %w", time.Since(start).Round(time.Second), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("exporting spans: %w (last: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMax)
	}
}

// post sends one request; retry says whether its failure is worth
// another (after at least the server's Retry-After).
func (e *exporter) post(ctx context.Context, body []byte) (retry bool, after time.Duration, err error) {
	if e.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return ctx.Err() == nil, 0, fmt.Errorf("posting spans to %s: %w", e.shown, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, 0, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		retry = true
	}
	return retry, after, fmt.Errorf("posting spans to %s: %s (%d bytes of body)", e.shown, resp.Status, len(msg))
}

// Shutdown stops exporting; spans exported after it are dropped.
func (e *exporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return ctx.Err()
}
