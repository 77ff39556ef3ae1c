package credinject

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"mcpbox/internal/egress"
)

// smallBody is the largest declared request body checked whole before
// the request is sent.
const smallBody = 64 << 10

// Request implements egress.Injector: it substitutes the placeholders of
// the credentials that own t (over TLS only) where they are configured,
// refuses any placeholder bound elsewhere, wraps the body in a scanner and
// returns a filter that redacts the real values from the response.
func (s *Set) Request(r *http.Request, t egress.Target) (func(*http.Response) error, error) {
	own := func(c *cred) bool { return t.TLS && c.ownHost(t.Host, t.Port) }
	// Refusals first, so that no inject event is recorded for a request
	// that does not leave.
	if err := s.checkLeftovers(r, t, own); err != nil {
		return nil, err
	}
	if r.Body != nil && r.Body != http.NoBody {
		var body io.ReadCloser = &trailerBody{ReadCloser: s.wrapBody(r.Body, t, own), r: r, check: s.trailers(t, own)}
		if r.ContentLength >= 0 && r.ContentLength <= smallBody {
			// A small declared body is checked whole before the request
			// leaves, so a refused one never reaches the server at all.
			// (Undeclared lengths stream: a client may wait for a reply
			// before it sends more.)
			b, err := io.ReadAll(io.LimitReader(body, smallBody+1))
			if errors.Is(err, egress.ErrRefused) {
				return nil, err
			} else if err != nil {
				return nil, fmt.Errorf("reading the request body: %w", err)
			}
			body = io.NopCloser(bytes.NewReader(b))
		}
		r.Body = body
	}
	owned := false
	for _, c := range s.creds {
		if !own(c) {
			continue
		}
		owned = true
		if c.AWS == nil {
			s.substitute(r, c, t)
		} else if err := s.resign(r, c, t); err != nil {
			return nil, err
		}
	}
	if !owned || s.red == nil {
		return nil, nil
	}
	// The response is scanned for the values; compressed bodies would
	// hide them (and filter refuses them). Only a SigV4 signature over
	// Accept-Encoding keeps the sandbox's (resign already signed ours
	// over identity); a response it gets compressed is refused.
	if !signsAcceptEncoding(r.Header.Get("Authorization")) {
		r.Header.Set("Accept-Encoding", "identity")
	}
	unranged(r)
	head := r.Method == http.MethodHead
	if isWebSocketRequest(r) {
		// Compressed frames could not be scanned either way.
		r.Header.Del("Sec-Websocket-Extensions")
		return func(resp *http.Response) error {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				s.redactHeader(resp.Header)
				return s.upgraded(resp, t, own)
			}
			return s.filter(resp, t, head)
		}, nil
	}
	return func(resp *http.Response) error { return s.filter(resp, t, head) }, nil
}

// substitute puts c's value where c configures it, if the placeholder is
// there.
func (s *Set) substitute(r *http.Request, c *cred, t egress.Target) {
	ph := c.placeholder
	inject := func(where string) {
		s.emit(Event{Credential: c.Name, Host: t.Host, Port: t.Port, Kind: "inject", Where: where})
	}
	s.substituteHeader(r.Header, c, "header", inject)
	if c.Query != "" && strings.Contains(r.URL.RawQuery, ph) {
		if q, ok := replaceQueryParam(r.URL.RawQuery, c.Query, ph, c.Value); ok {
			r.URL.RawQuery = q
			inject("query " + c.Query)
		}
	}
}

// substituteHeader puts c's value into the header (or trailer: kind) h
// where c configures it: the named header, Basic Authorization, any
// value.
func (s *Set) substituteHeader(h http.Header, c *cred, kind string, inject func(where string)) {
	ph := c.placeholder
	if c.Header != "" {
		if vv := h.Values(c.Header); len(vv) > 0 && containsAny(vv, ph) {
			format := c.Format
			if format == "" {
				format = "{value}"
			}
			h.Set(c.Header, strings.Replace(format, "{value}", c.Value, 1))
			inject(kind + " " + http.CanonicalHeaderKey(c.Header))
		}
	}
	if c.Basic {
		if v, ok := replaceBasic(h.Get("Authorization"), ph, c.Value); ok {
			h.Set("Authorization", v)
			if kind == "header" {
				inject("basic")
			} else {
				inject(kind + " basic")
			}
		}
	}
	if c.AnyHeader {
		for k, vv := range h {
			for i, v := range vv {
				if strings.Contains(v, ph) {
					vv[i] = strings.ReplaceAll(v, ph, c.Value)
					inject(kind + " " + k)
				}
			}
		}
	}
}

func containsAny(vv []string, sub string) bool {
	for _, v := range vv {
		if strings.Contains(v, sub) {
			return true
		}
	}
	return false
}

// replaceQueryParam replaces the value of parameter name where it is
// exactly ph, leaving every other byte of the raw query as it was (a
// re-encoded query could break signatures the client computed).
func replaceQueryParam(raw, name, ph, val string) (string, bool) {
	parts := strings.Split(raw, "&")
	done := false
	for i, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		dk, err1 := url.QueryUnescape(k)
		dv, err2 := url.QueryUnescape(v)
		if err1 == nil && err2 == nil && dk == name && dv == ph {
			parts[i] = k + "=" + url.QueryEscape(val)
			done = true
		}
	}
	return strings.Join(parts, "&"), done
}

// replaceBasic substitutes ph as the user or password of a Basic
// Authorization value.
func replaceBasic(auth, ph, val string) (string, bool) {
	user, pass, ok := parseBasic(auth)
	if !ok || user != ph && pass != ph {
		return "", false
	}
	if user == ph {
		user = val
	}
	if pass == ph {
		pass = val
	}
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)), true
}

func parseBasic(auth string) (user, pass string, ok bool) {
	scheme, rest, found := strings.Cut(strings.TrimSpace(auth), " ")
	if !found || !strings.EqualFold(scheme, "basic") {
		return "", "", false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(dec), ":")
}

// checkLeftovers refuses the request if a placeholder of a credential that
// does not own t is in its header, URL or Host, as written or decoded
// (percent-encoding, Basic). Own placeholders left where no substitution
// is configured stay placeholders.
func (s *Set) checkLeftovers(r *http.Request, t egress.Target, own func(*cred) bool) error {
	texts := []place{{"host", r.Host}, {"URL", r.URL.RawPath}, {"URL", r.URL.Path}, {"URL", r.URL.RawQuery}}
	if q, err := url.QueryUnescape(r.URL.RawQuery); err == nil {
		texts = append(texts, place{"URL", q})
	}
	return s.refuseIn(headerPlaces(texts, r.Header, "header"), t, own)
}

// place is a text of a request a placeholder may hide in.
type place struct{ where, text string }

// headerPlaces appends the names (case-folded on the way, in canonical
// form: both are folded) and values, raw and Basic-decoded, of h, a
// header or trailer (kind).
func headerPlaces(texts []place, h http.Header, kind string) []place {
	for k, vv := range h {
		texts = append(texts, place{kind + " name", strings.ToLower(k)})
		for _, v := range vv {
			texts = append(texts, place{kind + " " + k, v})
			if u, p, ok := parseBasic(v); ok {
				texts = append(texts, place{kind + " " + k, u + ":" + p})
			}
		}
	}
	return texts
}

// refuseIn refuses a placeholder of a credential that does not own t in
// any of texts.
func (s *Set) refuseIn(texts []place, t egress.Target, own func(*cred) bool) error {
	for _, n := range s.needle {
		if own(n.cred) {
			continue
		}
		for _, x := range texts {
			if strings.Contains(x.text, n.placeholder) || strings.HasSuffix(x.where, " name") && strings.Contains(x.text, strings.ToLower(n.placeholder)) {
				return s.exfiltration(n.cred, t, x.where)
			}
		}
	}
	return nil
}

// trailerBody checks and substitutes the request's trailers as its
// headers are, when the body ends: the transport sends trailers after
// the body's EOF, so a refusal fails that last read and the request is
// aborted before its trailers leave.
type trailerBody struct {
	io.ReadCloser
	r     *http.Request
	check func(http.Header) error
	done  bool
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		if len(b.r.Trailer) > 0 {
			if cerr := b.check(b.r.Trailer); cerr != nil {
				return n, cerr
			}
		}
	}
	return n, err
}

// trailers returns the check trailerBody runs on r's trailers for t.
func (s *Set) trailers(t egress.Target, own func(*cred) bool) func(http.Header) error {
	return func(h http.Header) error {
		if err := s.refuseIn(headerPlaces(nil, h, "trailer"), t, own); err != nil {
			return err
		}
		for _, c := range s.creds {
			if own(c) && c.AWS == nil {
				s.substituteHeader(h, c, "trailer", func(where string) {
					s.emit(Event{Credential: c.Name, Host: t.Host, Port: t.Port, Kind: "inject", Where: where})
				})
			}
		}
		return nil
	}
}

// filter redacts every credential value from a response of t.
func (s *Set) filter(resp *http.Response, t egress.Target, head bool) error {
	s.redactHeader(resp.Header)
	s.redactHeader(resp.Trailer) // the names announced; values come at the end
	if ce := encoded(resp.Header); ce != "" {
		return fmt.Errorf("response from %s has content coding %s and cannot be scanned for credential values", authority(t), ce)
	}
	if resp.StatusCode == http.StatusPartialContent {
		return fmt.Errorf("response from %s is a part of one (206) and cannot be scanned for credential values", authority(t))
	}
	if head || resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	resp.Body = newRunsBody(newRedactBody(resp.Body, s.red, s.pf, func() { s.redactHeader(resp.Trailer) }), s.runs)
	// A redaction mark is not as long as the value: the length is unknown.
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return nil
}

// rangeHeaders ask for a part of a response.
var rangeHeaders = []string{"Range", "If-Range"}

// unranged asks for the whole response: a part could hold a part of a
// value, which the scan cannot tell from other bytes, and a sandbox could
// read an echoed value a few bytes at a time. A server may answer any
// range request with the whole; a part it sends anyway is refused
// (filter). Only a SigV4 signature over them that mcpbox does not
// re-sign keeps the sandbox's (resign signed ours without them).
func unranged(r *http.Request) {
	auth := r.Header.Get("Authorization")
	for _, h := range rangeHeaders {
		if !signsHeader(auth, strings.ToLower(h)) {
			r.Header.Del(h)
		}
	}
}

func authority(t egress.Target) string {
	return net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
}

// encoded returns the first content coding of h that is not identity,
// or "": any one of them, on any Content-Encoding line, would hide the
// values from the scan.
func encoded(h http.Header) string {
	for _, line := range h.Values("Content-Encoding") {
		for _, ce := range strings.Split(line, ",") {
			if ce = strings.TrimSpace(ce); ce != "" && !strings.EqualFold(ce, "identity") {
				return printable(ce)
			}
		}
	}
	return ""
}

// redactHeader redacts every value of h in place and drops every field
// whose name holds a credential's value. Names are compared without
// case: on the way they are re-cased (Go's canonical form, HTTP/2's
// lower case), which the redactor's exact match would miss.
func (s *Set) redactHeader(h http.Header) {
	for name, vv := range h {
		if s.inName(name) {
			delete(h, name)
			continue
		}
		for i, v := range vv {
			vv[i] = s.runs.String(s.red.String(v))
		}
	}
}

// inName reports whether a header name holds one of the values, in any
// of the redactor's forms, in any case.
func (s *Set) inName(name string) bool {
	name = strings.ToLower(name)
	for _, n := range s.lowerForms {
		if strings.Contains(name, n) {
			return true
		}
	}
	return s.lowerRuns.String(name) != name // a run of a value
}
