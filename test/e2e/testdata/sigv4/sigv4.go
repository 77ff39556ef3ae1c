// Package sigv4 is a small AWS Signature Version 4 signer and verifier
// (header-signed requests, S3 paths as they are) for the e2e tests: the
// test server signs with the fake pair the sandbox holds, a loopback
// S3-style service verifies with the real pair. It is written apart from
// internal/credinject, whose re-signing sits between the two.
package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Region and Service are the scope the tests sign for.
const (
	Region  = "us-east-1"
	Service = "s3"
)

const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func hmacSHA(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

func hashHex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// canonical is the canonical request of r over the signed headers.
func canonical(r *http.Request, signed []string, payload string) string {
	var q []string
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			q = append(q, url.QueryEscape(k)+"="+url.QueryEscape(v))
		}
	}
	sort.Strings(q)
	var h strings.Builder
	for _, name := range signed {
		v := r.Header.Get(name)
		if name == "host" {
			v = r.Host
		}
		fmt.Fprintf(&h, "%s:%s\n", name, strings.TrimSpace(v))
	}
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	return strings.Join([]string{r.Method, path, strings.Join(q, "&"), h.String(), strings.Join(signed, ";"), payload}, "\n")
}

func signature(secret, date, amzDate, creq string) string {
	scope := date + "/" + Region + "/" + Service + "/aws4_request"
	sts := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hashHex(creq)
	k := hmacSHA([]byte("AWS4"+secret), date)
	k = hmacSHA(k, Region)
	k = hmacSHA(k, Service)
	k = hmacSHA(k, "aws4_request")
	return hex.EncodeToString(hmacSHA(k, sts))
}

// Sign signs r (no body) with the key pair and session token (if any).
// r.Host must be set as it will be sent.
func Sign(r *http.Request, keyID, secret, token string, now time.Time) {
	amzDate := now.UTC().Format("20060102T150405Z")
	r.Header.Set("X-Amz-Date", amzDate)
	r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	signed := []string{"host", "x-amz-content-sha256", "x-amz-date"}
	if token != "" {
		r.Header.Set("X-Amz-Security-Token", token)
		signed = append(signed, "x-amz-security-token")
	}
	sig := signature(secret, amzDate[:8], amzDate, canonical(r, signed, emptySHA256))
	r.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, Signature=%s",
		keyID, amzDate[:8], Region, Service, strings.Join(signed, ";"), sig))
}

// Verify checks that r is signed by keyID with secret and carries token
// (if not "").
func Verify(r *http.Request, keyID, secret, token string) error {
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ")
	if !ok {
		return errors.New("not SigV4-signed")
	}
	var cred, signedList, sig string
	for _, part := range strings.Split(auth, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signedList = v
		case "Signature":
			sig = v
		}
	}
	kid, scope, _ := strings.Cut(cred, "/")
	if kid != keyID {
		return fmt.Errorf("signed by key %q, not the real key", kid)
	}
	date, _, _ := strings.Cut(scope, "/")
	signed := strings.Split(signedList, ";")
	if token != "" && (r.Header.Get("X-Amz-Security-Token") != token || !contains(signed, "x-amz-security-token")) {
		return errors.New("the session token is not the real one, or not signed")
	}
	want := signature(secret, date, r.Header.Get("X-Amz-Date"), canonical(r, signed, r.Header.Get("X-Amz-Content-Sha256")))
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return errors.New("the signature does not verify with the real secret key")
	}
	return nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
