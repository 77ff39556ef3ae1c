package credinject

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"mcpbox/internal/egress"
)

// TestSigV4Vectors checks the signer against AWS's published examples:
// get-vanilla and get-vanilla-query-order-key-case of the Signature
// Version 4 test suite, and the S3 GET Object example of the S3 API
// reference (sig-v4-header-based-auth).
func TestSigV4Vectors(t *testing.T) {
	const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	cases := []struct {
		name, secret, host, target, amzDate string
		scope                               sigV4Auth
		extra                               map[string]string
		signed                              []string
		payload, want                       string
	}{
		{
			name: "get-vanilla", secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
			host: "example.amazonaws.com", target: "/", amzDate: "20150830T123600Z",
			scope:   sigV4Auth{date: "20150830", region: "us-east-1", service: "service"},
			signed:  []string{"host", "x-amz-date"},
			payload: emptyHash, want: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
		},
		{
			name: "get-vanilla-query-order-key-case", secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
			host: "example.amazonaws.com", target: "/?Param2=value2&Param1=value1", amzDate: "20150830T123600Z",
			scope:   sigV4Auth{date: "20150830", region: "us-east-1", service: "service"},
			signed:  []string{"host", "x-amz-date"},
			payload: emptyHash, want: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
		},
		{
			name: "s3 GET object", secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
			host: "examplebucket.s3.amazonaws.com", target: "/test.txt", amzDate: "20130524T000000Z",
			scope:   sigV4Auth{date: "20130524", region: "us-east-1", service: "s3"},
			extra:   map[string]string{"Range": "bytes=0-9", "X-Amz-Content-Sha256": emptyHash},
			signed:  []string{"host", "range", "x-amz-content-sha256", "x-amz-date"},
			payload: emptyHash, want: "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest("GET", "https://"+tc.host+tc.target, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("X-Amz-Date", tc.amzDate)
			for k, v := range tc.extra {
				r.Header.Set(k, v)
			}
			got := signV4(tc.secret, tc.scope, tc.amzDate, canonicalRequest(r, tc.signed, tc.payload, false))
			if got != tc.want {
				t.Errorf("signature %s, want %s\ncanonical:\n%s", got, tc.want, canonicalRequest(r, tc.signed, tc.payload, false))
			}
		})
	}
}

// The test's own SigV4 (S3 flavour), written apart from the package's to
// cross-check it: a client signer and a server verifier.

func tEscape(s string, path bool) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~", c) >= 0 || path && c == '/' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func tSignature(secret, region, service string, r *http.Request, signed []string, amzDate, payload string) string {
	q := r.URL.Query()
	var keys []string
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var qs []string
	for _, k := range keys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			qs = append(qs, tEscape(k, false)+"="+tEscape(v, false))
		}
	}
	var hs strings.Builder
	for _, h := range signed {
		v := r.Header.Get(h)
		if h == "host" {
			v = r.Host
		}
		hs.WriteString(h + ":" + strings.TrimSpace(v) + "\n")
	}
	canon := strings.Join([]string{r.Method, tEscape(r.URL.Path, true), strings.Join(qs, "&"), hs.String(), strings.Join(signed, ";"), payload}, "\n")
	sum := sha256.Sum256([]byte(canon))
	scope := amzDate[:8] + "/" + region + "/" + service + "/aws4_request"
	sts := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	mac := func(k []byte, s string) []byte { m := hmac.New(sha256.New, k); m.Write([]byte(s)); return m.Sum(nil) }
	k := mac(mac(mac(mac([]byte("AWS4"+secret), amzDate[:8]), region), service), "aws4_request")
	return hex.EncodeToString(mac(k, sts))
}

// tSign signs r as an SDK would, with x-amz-content-sha256, (if token)
// x-amz-security-token and the extra headers r has.
func tSign(r *http.Request, keyID, secret, token string, body []byte, extra ...string) {
	amzDate := time.Now().UTC().Format("20060102T150405Z")
	sum := sha256.Sum256(body)
	r.Header.Set("X-Amz-Date", amzDate)
	r.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	signed := []string{"host", "x-amz-content-sha256", "x-amz-date"}
	if token != "" {
		r.Header.Set("X-Amz-Security-Token", token)
		signed = append(signed, "x-amz-security-token")
	}
	signed = append(signed, extra...)
	slices.Sort(signed)
	sig := tSignature(secret, "us-east-1", "s3", r, signed, amzDate, r.Header.Get("X-Amz-Content-Sha256"))
	r.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s/us-east-1/s3/aws4_request, SignedHeaders=%s, Signature=%s",
		keyID, amzDate[:8], strings.Join(signed, ";"), sig))
}

// s3Verifier accepts only requests signed with the real pair (and token),
// whose body matches x-amz-content-sha256.
func s3Verifier(keyID, secret, token string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		deny := func(why string) {
			http.Error(w, "<Error><Code>SignatureDoesNotMatch</Code>"+why+"</Error>", http.StatusForbidden)
		}
		auth := r.Header.Get("Authorization")
		var cred, signedH, sig string
		for _, f := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ", ") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "Credential":
				cred = v
			case "SignedHeaders":
				signedH = v
			case "Signature":
				sig = v
			}
		}
		parts := strings.Split(cred, "/")
		if len(parts) != 5 || parts[0] != keyID {
			deny("unknown key " + parts[0])
			return
		}
		if token != "" && (r.Header.Get("X-Amz-Security-Token") != token || !strings.Contains(signedH, "x-amz-security-token")) {
			deny("bad token")
			return
		}
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(body)
		if r.Header.Get("X-Amz-Content-Sha256") != hex.EncodeToString(sum[:]) {
			deny("payload hash")
			return
		}
		want := tSignature(secret, parts[2], parts[3], r, strings.Split(signedH, ";"), r.Header.Get("X-Amz-Date"), r.Header.Get("X-Amz-Content-Sha256"))
		if !hmac.Equal([]byte(want), []byte(sig)) {
			deny("signature")
			return
		}
		fmt.Fprintf(w, "stored %d bytes at %s", len(body), r.URL.Path)
	}
}

const (
	awsKeyID  = "AKIAREALKEY000000001"
	awsSecret = "RealSecretAccessKey0123456789abcdefGHIJK"
	awsToken  = "FwoGZXIvYXdzEJr//////////wEaDRealSessionTokenValue0123456789abcdefABCDEF=="
)

func TestSigV4Resign(t *testing.T) {
	for _, withToken := range []bool{false, true} {
		t.Run(fmt.Sprintf("token=%v", withToken), func(t *testing.T) {
			tok := ""
			if withToken {
				tok = awsToken
			}
			u := startUpstream(t, true, s3Verifier(awsKeyID, awsSecret, tok))
			r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
				Credential{Name: "AWS", Hosts: []string{u.hostPort()}, AWS: &AWS{AccessKeyID: awsKeyID, SecretAccessKey: awsSecret, SessionToken: tok}})
			fk, fs, ft, ok := r.set.AWSPlaceholder("AWS")
			if !ok || fk == awsKeyID || fs == awsSecret || len(fk) != len(awsKeyID) || !strings.HasPrefix(fk, "AKIA") || (ft == "") == withToken {
				t.Fatalf("fake pair %q %q %q", fk, fs, ft)
			}
			c := r.client(t, nil, true)
			body := []byte("object body")
			req := newReq(t, "PUT", "https://"+u.hostPort()+"/bucket/key%20with%20space.txt?x-id=PutObject&acl=private", strings.NewReader(string(body)))
			tSign(req, fk, fs, ft, body)
			code, txt, _ := do(t, c, req)
			if code != 200 || !strings.Contains(txt, "stored 11 bytes") {
				t.Fatalf("status %d: %s", code, txt)
			}
			if ev := r.log.find("inject"); len(ev) != 1 || ev[0].Where != "sigv4" {
				t.Errorf("events %+v", ev)
			}
			got := u.requests()[0]
			if strings.Contains(got.Header.Get("Authorization"), fk) || strings.Contains(fmt.Sprint(got.Header), fs) {
				t.Error("the fake pair reached the service")
			}
			// The same request signed with a key the sandbox does not hold
			// (the fake id, a wrong secret) is refused before it leaves.
			bad := newReq(t, "PUT", "https://"+u.hostPort()+"/bucket/k", strings.NewReader("x"))
			tSign(bad, fk, "not-the-fake-secret-000000000000000000000", ft, []byte("x"))
			if code, txt, _ := do(t, c, bad); code != 403 || !strings.Contains(txt, "does not verify") {
				t.Errorf("badly signed: %d %q", code, txt)
			}
			if len(u.requests()) != 1 {
				t.Error("a badly signed request reached the service")
			}
		})
	}
}

// TestSigV4SignedAcceptEncoding: a request signed over Accept-Encoding
// is re-signed over identity, so that the response can be scanned and
// the signature still verifies.
func TestSigV4SignedAcceptEncoding(t *testing.T) {
	u := startUpstream(t, true, s3Verifier(awsKeyID, awsSecret, ""))
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "AWS", Hosts: []string{u.hostPort()}, AWS: &AWS{AccessKeyID: awsKeyID, SecretAccessKey: awsSecret}})
	fk, fs, _, _ := r.set.AWSPlaceholder("AWS")
	req := newReq(t, "GET", "https://"+u.hostPort()+"/bucket/key", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	tSign(req, fk, fs, "", nil, "accept-encoding")
	if code, txt, _ := do(t, r.client(t, nil, false), req); code != 200 {
		t.Fatalf("status %d: %s", code, txt)
	}
	if got := u.requests()[0]; got.Header.Get("Accept-Encoding") != "identity" || !strings.Contains(got.Header.Get("Authorization"), "accept-encoding") {
		t.Errorf("the service got Accept-Encoding %q, Authorization %q", got.Header.Get("Accept-Encoding"), got.Header.Get("Authorization"))
	}
}

// TestSigV4SignedRange: a ranged GET signed over Range (an S3 client's
// resumed download) is re-signed without it, so that the service sends
// the whole object, which can be scanned, and the signature verifies.
func TestSigV4SignedRange(t *testing.T) {
	u := startUpstream(t, true, s3Verifier(awsKeyID, awsSecret, ""))
	r := startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
		Credential{Name: "AWS", Hosts: []string{u.hostPort()}, AWS: &AWS{AccessKeyID: awsKeyID, SecretAccessKey: awsSecret}})
	fk, fs, _, _ := r.set.AWSPlaceholder("AWS")
	req := newReq(t, "GET", "https://"+u.hostPort()+"/bucket/key", nil)
	req.Header.Set("Range", "bytes=0-3")
	tSign(req, fk, fs, "", nil, "range")
	if code, txt, _ := do(t, r.client(t, nil, false), req); code != 200 {
		t.Fatalf("status %d: %s", code, txt)
	}
	if got := u.requests()[0]; got.Header.Get("Range") != "" || strings.Contains(got.Header.Get("Authorization"), "range") {
		t.Errorf("the service got Range %q, Authorization %q", got.Header.Get("Range"), got.Header.Get("Authorization"))
	}
}

func TestSigV4UnsupportedFormsRefused(t *testing.T) {
	u := startUpstream(t, true, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "passed") })
	mk := func(pass bool) *rig {
		return startRig(t, pool(u), []egress.Rule{{Host: "127.0.0.1", Ports: []int{u.port}}},
			Credential{Name: "AWS", Hosts: []string{u.hostPort()}, AWS: &AWS{AccessKeyID: awsKeyID, SecretAccessKey: awsSecret, PassThrough: pass}})
	}
	strict, loose := mk(false), mk(true)
	fk, fs, _, _ := strict.set.AWSPlaceholder("AWS")
	forms := []struct {
		name, want string
		req        func(fk, fs string) *http.Request
	}{
		{"presigned", "presigned URL", func(fk, fs string) *http.Request {
			return newReq(t, "GET", "https://"+u.hostPort()+"/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="+url.QueryEscape(fk+"/20260101/us-east-1/s3/aws4_request")+"&X-Amz-Signature=00", nil)
		}},
		{"streaming", "streaming payload", func(fk, fs string) *http.Request {
			r := newReq(t, "PUT", "https://"+u.hostPort()+"/b/k", strings.NewReader("x"))
			tSign(r, fk, fs, "", []byte("x"))
			r.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
			return r
		}},
		{"sigv4a", "SigV4a", func(fk, fs string) *http.Request {
			r := newReq(t, "GET", "https://"+u.hostPort()+"/b/k", nil)
			r.Header.Set("Authorization", "AWS4-ECDSA-P256-SHA256 Credential="+fk+"/20260101/s3/aws4_request, SignedHeaders=host, Signature=30")
			return r
		}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			code, txt, _ := do(t, strict.client(t, nil, false), f.req(fk, fs))
			if code != 403 || !strings.Contains(txt, f.want) || !strings.Contains(txt, "pass_through") {
				t.Errorf("strict: %d %q", code, txt)
			}
			lk, ls, _, _ := loose.set.AWSPlaceholder("AWS")
			code, txt, _ = do(t, loose.client(t, nil, false), f.req(lk, ls))
			if code != 200 || txt != "passed" {
				t.Errorf("pass-through: %d %q", code, txt)
			}
		})
	}
	if n := len(strict.log.find("refused")); n != len(forms) {
		t.Errorf("%d refused events, want %d", n, len(forms))
	}
}

// TestSignsAcceptEncoding: only a SigV4 or SigV4a signature whose signed
// headers list accept-encoding keeps the sandbox's Accept-Encoding; the
// name anywhere else in an Authorization does not.
func TestSignsAcceptEncoding(t *testing.T) {
	for auth, want := range map[string]bool{
		"AWS4-HMAC-SHA256 Credential=AKIA/20260101/us-east-1/s3/aws4_request, SignedHeaders=accept-encoding;host, Signature=ab": true,
		"AWS4-ECDSA-P256-SHA256 Credential=AKIA/20260101/s3/aws4_request, SignedHeaders=accept-encoding;host, Signature=30":     true,
		"AWS4-HMAC-SHA256 Credential=AKIA/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=accept-encoding":    false,
		"x accept-encoding":                    false,
		"Bearer SignedHeaders=accept-encoding": false,
		"":                                     false,
	} {
		if got := signsAcceptEncoding(auth); got != want {
			t.Errorf("signsAcceptEncoding(%q) = %v", auth, got)
		}
	}
}
