package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client is a small JSON client of the API server for tests and the test
// node: no discovery, no caching; paths are the API's own
// (/api/v1/namespaces/NS/pods). It is safe for concurrent use.
type Client struct {
	Server string // https://127.0.0.1:PORT
	HTTP   *http.Client
}

// StatusError is an answer of the API server other than 2xx.
type StatusError struct {
	Method, Path string
	Code         int
	Reason       string // the Status object's reason, e.g. NotFound, AlreadyExists, Conflict, Forbidden
	Message      string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

// IsNotFound reports whether err is a 404 of the API server.
func IsNotFound(err error) bool { return statusCode(err) == http.StatusNotFound }

// IsConflict reports whether err is a 409 (a conflict or an object that
// already exists).
func IsConflict(err error) bool { return statusCode(err) == http.StatusConflict }

// IsForbidden reports whether err is a 403 (RBAC or admission said no).
func IsForbidden(err error) bool { return statusCode(err) == http.StatusForbidden }

func statusCode(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// Do sends in (JSON, unless it is a []byte, sent as it is) and decodes
// the answer into out (if non-nil). The content type is JSON, or JSON
// merge patch for PATCH.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return statusError(method, path, resp.StatusCode, body)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, ok := in.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(in); err != nil {
				return nil, fmt.Errorf("%s %s: encoding the body: %w", method, path, err)
			}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp, nil
}

func statusError(method, path string, code int, body []byte) error {
	var st struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &st) != nil || st.Message == "" {
		st.Message = strings.TrimSpace(string(body))
	}
	return &StatusError{Method: method, Path: path, Code: code, Reason: st.Reason, Message: st.Message}
}

// watchEvent is one line of a watch stream.
type watchEvent struct {
	Type   string          `json:"type"` // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
	Object json.RawMessage `json:"object"`
}

// watch streams the events of path (a list path) from resourceVersion rv
// to fn until the server ends the stream, ctx ends or fn fails. The
// server ends a watch after a while: the caller lists and watches again.
func (c *Client) watch(ctx context.Context, path, rv string, fn func(watchEvent) error) error {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The server closes the stream after timeoutSeconds, so a silent
	// broken connection is noticed within a minute.
	resp, err := c.send(ctx, http.MethodGet, path+sep+"watch=true&allowWatchBookmarks=true&timeoutSeconds=60&resourceVersion="+rv, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return statusError(http.MethodGet, path, resp.StatusCode, body)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching %s: %w", path, err)
		}
		if ev.Type == "ERROR" {
			return statusError(http.MethodGet, path, http.StatusGone, ev.Object)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// poll calls cond every interval until it reports true or fails, or
// timeout passes.
func poll(ctx context.Context, interval, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not done after %v", timeout)
		case <-time.After(interval):
		}
	}
}
