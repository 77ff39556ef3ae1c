package credinject

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"mcpbox/internal/egress"
)

// SigV4 names.
const (
	sigV4Algorithm  = "AWS4-HMAC-SHA256"
	sigV4aAlgorithm = "AWS4-ECDSA-P256-SHA256"
	tokenHeader     = "X-Amz-Security-Token"
)

// sigV4Auth is a parsed SigV4 Authorization header.
type sigV4Auth struct {
	keyID, date, region, service string
	signed                       []string // lower-case, sorted as sent
	signature                    string
}

func (a sigV4Auth) scope() string {
	return a.date + "/" + a.region + "/" + a.service + "/aws4_request"
}

func parseSigV4(h string) (sigV4Auth, error) {
	var a sigV4Auth
	rest, ok := strings.CutPrefix(h, sigV4Algorithm+" ")
	if !ok {
		return a, errors.New("not " + sigV4Algorithm)
	}
	for _, f := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return a, fmt.Errorf("malformed field %q", printable(f))
		}
		switch k {
		case "Credential":
			p := strings.Split(v, "/")
			if len(p) != 5 || p[4] != "aws4_request" {
				return a, errors.New("malformed Credential scope")
			}
			a.keyID, a.date, a.region, a.service = p[0], p[1], p[2], p[3]
		case "SignedHeaders":
			a.signed = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	if a.keyID == "" || len(a.signed) == 0 || a.signature == "" {
		return a, errors.New("missing Credential, SignedHeaders or Signature")
	}
	return a, nil
}

// signsAcceptEncoding reports whether auth is a SigV4 (or SigV4a)
// signature over Accept-Encoding, which changing the header would break.
func signsAcceptEncoding(auth string) bool { return signsHeader(auth, "accept-encoding") }

// signsHeader reports whether auth is a SigV4 (or SigV4a) signature over
// the header name (lower case).
func signsHeader(auth, name string) bool {
	scheme, rest, _ := strings.Cut(auth, " ")
	if !strings.HasPrefix(scheme, "AWS4-") {
		return false
	}
	for _, f := range strings.Split(rest, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(f), "SignedHeaders="); ok {
			return slices.Contains(strings.Split(v, ";"), name)
		}
	}
	return false
}

// printable keeps request text in errors harmless.
func printable(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.QuoteToASCII(s)
}

// resign verifies that a SigV4-signed request to t is signed with c's fake
// pair and signs it again with the real one. Requests signed otherwise, or
// not signed, pass unchanged.
func (s *Set) resign(r *http.Request, c *cred, t egress.Target) error {
	a := c.AWS
	refuse := func(what string, passable bool) error {
		if passable && a.PassThrough {
			return nil
		}
		reason := fmt.Sprintf("AWS credential %s: %s to %s refused", c.Name, what, authority(t))
		if passable {
			reason += " (mcpbox re-signs header-signed SigV4 only; set pass_through to forward it unchanged)"
		}
		s.emit(Event{Credential: c.Name, Host: t.Host, Port: t.Port, Kind: "refused", Where: "sigv4", Reason: reason})
		return fmt.Errorf("%w: %s", egress.ErrRefused, reason)
	}
	q := r.URL.Query()
	if q.Has("X-Amz-Algorithm") || q.Has("X-Amz-Signature") || q.Has("X-Amz-Credential") {
		return refuse("a presigned URL", true)
	}
	auth := r.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(auth, sigV4aAlgorithm):
		return refuse("a SigV4a signature", true)
	case !strings.HasPrefix(auth, sigV4Algorithm+" "):
		return nil
	}
	sa, err := parseSigV4(auth)
	if err != nil {
		return refuse("a malformed SigV4 Authorization header ("+err.Error()+")", false)
	}
	if sa.keyID != c.fakeKeyID {
		return nil // not the pair we gave the sandbox: nothing of ours to add
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if strings.HasPrefix(payload, "STREAMING-") {
		return refuse("a streaming payload signature ("+payload+")", true)
	}
	if payload == "" {
		if payload, err = hashBody(r, s.opts.MaxBodyBuffer); err != nil {
			return refuse(err.Error(), false)
		}
	}
	amzDate := r.Header.Get("X-Amz-Date")
	if !strings.HasPrefix(amzDate, sa.date) || len(amzDate) != len("20060102T150405Z") {
		return refuse("a SigV4 request without a matching X-Amz-Date", false)
	}
	double, ok := false, false
	for _, d := range []bool{false, true} {
		want := signV4(c.fakeSecret, sa, amzDate, canonicalRequest(r, sa.signed, payload, d))
		if hmac.Equal([]byte(want), []byte(sa.signature)) {
			double, ok = d, true
			break
		}
	}
	if !ok {
		return refuse("a request whose SigV4 signature does not verify with the sandbox's key pair", false)
	}
	signed := sa.signed
	tok := r.Header.Get(tokenHeader)
	switch {
	case tok != "" && tok != c.fakeToken:
		return refuse("a request with a session token that is not the sandbox's", false)
	case a.SessionToken != "":
		r.Header.Set(tokenHeader, a.SessionToken)
		if !slices.Contains(signed, "x-amz-security-token") {
			signed = append(slices.Clone(signed), "x-amz-security-token")
			slices.Sort(signed)
		}
	case tok != "":
		r.Header.Del(tokenHeader)
		signed = slices.DeleteFunc(slices.Clone(signed), func(h string) bool { return h == "x-amz-security-token" })
	}
	// Ours asks for the whole response (see unranged).
	for _, h := range rangeHeaders {
		if slices.Contains(signed, strings.ToLower(h)) {
			r.Header.Del(h)
			signed = slices.DeleteFunc(slices.Clone(signed), func(s string) bool { return s == strings.ToLower(h) })
		}
	}
	if slices.Contains(signed, "accept-encoding") {
		// Signed over by the sandbox, so kept by the caller; ours is
		// signed over identity, so that the response can be scanned.
		r.Header.Set("Accept-Encoding", "identity")
	}
	real := sa
	real.keyID, real.signed = a.AccessKeyID, signed
	real.signature = signV4(a.SecretAccessKey, real, amzDate, canonicalRequest(r, signed, payload, double))
	r.Header.Set("Authorization", real.header())
	s.emit(Event{Credential: c.Name, Host: t.Host, Port: t.Port, Kind: "inject", Where: "sigv4"})
	return nil
}

func (a sigV4Auth) header() string {
	return sigV4Algorithm + " Credential=" + a.keyID + "/" + a.scope() +
		", SignedHeaders=" + strings.Join(a.signed, ";") + ", Signature=" + a.signature
}

// hashBody reads r's body (at most max bytes), puts it back and returns
// its SHA-256 in hex.
func hashBody(r *http.Request, max int64) (string, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return hex.EncodeToString(sha256.New().Sum(nil)), nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	r.Body.Close()
	if err != nil {
		return "", fmt.Errorf("reading the body to hash it: %v", err)
	}
	if int64(len(b)) > max {
		return "", fmt.Errorf("a body over %d bytes without x-amz-content-sha256", max)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// signV4 returns the hex signature of canon under secret and a's scope.
func signV4(secret string, a sigV4Auth, amzDate, canon string) string {
	h := sha256.Sum256([]byte(canon))
	sts := sigV4Algorithm + "\n" + amzDate + "\n" + a.scope() + "\n" + hex.EncodeToString(h[:])
	k := hmacSHA256([]byte("AWS4"+secret), a.date)
	k = hmacSHA256(k, a.region)
	k = hmacSHA256(k, a.service)
	k = hmacSHA256(k, "aws4_request")
	return hex.EncodeToString(hmacSHA256(k, sts))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalRequest builds the SigV4 canonical request. double encodes the
// path twice, as every service but S3 expects.
func canonicalRequest(r *http.Request, signed []string, payload string, double bool) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	path := r.URL.EscapedPath()
	if dec, err := url.PathUnescape(path); err == nil {
		path = dec
	}
	if path == "" {
		path = "/"
	}
	uri := awsEscape(path, true)
	if double {
		uri = awsEscape(uri, true)
	}
	b.WriteString(uri + "\n")
	b.WriteString(canonicalQuery(r.URL.RawQuery) + "\n")
	for _, h := range signed {
		b.WriteString(h + ":" + canonicalHeaderValue(r, h) + "\n")
	}
	b.WriteString("\n" + strings.Join(signed, ";") + "\n" + payload)
	return b.String()
}

func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	var pairs [][2]string
	for _, p := range strings.Split(raw, "&") {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		pairs = append(pairs, [2]string{awsEscape(k, false), awsEscape(v, false)})
	}
	slices.SortFunc(pairs, func(x, y [2]string) int {
		if c := strings.Compare(x[0], y[0]); c != 0 {
			return c
		}
		return strings.Compare(x[1], y[1])
	})
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p[0] + "=" + p[1]
	}
	return strings.Join(out, "&")
}

func canonicalHeaderValue(r *http.Request, name string) string {
	var vals []string
	switch name {
	case "host":
		vals = []string{r.Host}
	case "content-length":
		vals = slices.Clone(r.Header.Values("Content-Length"))
		if len(vals) == 0 && r.ContentLength >= 0 {
			vals = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	default:
		vals = slices.Clone(r.Header.Values(name))
	}
	for i, v := range vals {
		vals[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(vals, ",")
}

// awsEscape percent-encodes every byte but the unreserved ones (and '/'
// when keepSlash), upper-case hex, as SigV4 specifies.
func awsEscape(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == '/' && keepSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}
