package egressproxy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// KeySize is the size of the HMAC key NewKey makes; Verify and New refuse
// shorter keys.
const KeySize = 32

// tokenVersion prefixes every token so that the format can change.
const tokenVersion = "v1"

// b64 decodes a token's parts: unpadded base64url, strictly.
var b64 = base64.RawURLEncoding.Strict()

// NewKey returns a fresh random HMAC key.
func NewKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("making the egress proxy key: %w", err)
	}
	return k, nil
}

// Sign returns pod's token for server's allowlist, valid until expiry:
// "v1.SERVER.EXPIRY.MAC", SERVER in unpadded base64url, EXPIRY in Unix
// seconds, MAC the base64url HMAC-SHA256 over all three and the pod's
// name. Every character is unreserved in a URL's userinfo.
func Sign(key []byte, pod, server string, expiry time.Time) string {
	srv := base64.RawURLEncoding.EncodeToString([]byte(server))
	exp := strconv.FormatInt(expiry.Unix(), 10)
	return tokenVersion + "." + srv + "." + exp + "." + base64.RawURLEncoding.EncodeToString(mac(key, pod, srv, exp))
}

func mac(key []byte, pod, srv, exp string) []byte {
	h := hmac.New(sha256.New, key)
	// Lengths first: no two (pod, server, expiry) triples hash the same
	// bytes.
	fmt.Fprintf(h, "mcpbox egress token %s\x00%d:%s\x00%s\x00%s", tokenVersion, len(pod), pod, srv, exp)
	return h.Sum(nil)
}

// Errors of Verify.
var (
	ErrBadToken     = errors.New("invalid token")
	ErrTokenExpired = errors.New("token expired")
)

// Verify checks pod's token at now and returns the server it names and
// its expiry. The MAC is compared in constant time before anything the
// token says is believed.
func Verify(key []byte, pod, token string, now time.Time) (server string, expiry time.Time, err error) {
	if len(key) < KeySize {
		return "", time.Time{}, errors.New("egress proxy key too short")
	}
	// encoding/base64 skips \r and \n even when strict: refused here,
	// so that a token has one spelling.
	parts := strings.Split(token, ".")
	if len(parts) != 4 || parts[0] != tokenVersion || strings.ContainsAny(token, "\r\n") {
		return "", time.Time{}, ErrBadToken
	}
	// Strict: a token has one spelling (no stray bits in the last
	// character), so a log or a cache can compare tokens as text.
	got, err := b64.DecodeString(parts[3])
	if err != nil || !hmac.Equal(got, mac(key, pod, parts[1], parts[2])) {
		return "", time.Time{}, ErrBadToken
	}
	srv, err := b64.DecodeString(parts[1])
	if err != nil || len(srv) == 0 {
		return "", time.Time{}, ErrBadToken
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return "", time.Time{}, ErrBadToken
	}
	if expiry = time.Unix(exp, 0); !now.Before(expiry) {
		return "", time.Time{}, ErrTokenExpired
	}
	return string(srv), expiry, nil
}

// ProxyURL is the proxy URL a pod uses: http://POD:TOKEN@ADDR, where addr
// is the proxy Service's host:port (its cluster IP: the pods have no DNS).
func ProxyURL(addr, pod, token string) string {
	return (&url.URL{Scheme: "http", User: url.UserPassword(pod, token), Host: addr}).String()
}

// ProxyEnv is the environment that sends a pod's HTTP clients through the
// proxy as pod: the gateway adds it to the pod's start request.
func ProxyEnv(addr, pod, token string) map[string]string {
	u := ProxyURL(addr, pod, token)
	return map[string]string{"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u}
}
