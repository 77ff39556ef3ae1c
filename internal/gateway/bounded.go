package gateway

import (
	"fmt"
	"io"
	"mime"
	"net/http"
)

// BoundedBodies wraps next so that an answer which is not an event stream
// fails once more than max bytes of its body are read: the go-sdk reads a
// JSON answer, or an error's body, whole, and an upstream (a remote server,
// a pod's agent) must not make the gateway hold more than a message's
// limit. An event stream is left alone: its reader bounds each event
// (the go-sdk's MaxEventSize and the reader's own limit). from names the
// peer in the error ("server" reads "the server's answer is larger than
// ... bytes").
func BoundedBodies(next http.RoundTripper, max int64, from string) http.RoundTripper {
	return boundedBodies{next: next, max: max, from: from}
}

type boundedBodies struct {
	next http.RoundTripper
	max  int64
	from string
}

func (t boundedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "text/event-stream" {
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: t.max, max: t.max, from: t.from}
	}
	return resp, nil
}

// cappedBody fails a read past max bytes.
type cappedBody struct {
	io.ReadCloser
	left, max int64
	from      string
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 && err != nil {
			return 0, err // the end, exactly at the limit
		}
		return 0, fmt.Errorf("the %s's answer is larger than %d bytes", b.from, b.max)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
