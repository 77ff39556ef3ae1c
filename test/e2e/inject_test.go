package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"mcpbox/test/e2e/testdata/sigv4"
)

// The credential-injection tests (config secrets.NAME.inject): a server
// in a real sandbox calls HTTPS services on the host's loopback that
// require the real token, holding only a placeholder; the services' CA
// is trusted by mcpbox itself through SSL_CERT_FILE.

// injService is one loopback service; it records what it was sent.
type injService struct {
	port int
	mu   sync.Mutex
	reqs []string // each request's method, URL and headers
}

func (s *injService) seen() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.reqs, "\n")
}

func (s *injService) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// injServe serves h on 127.0.0.1, over TLS with cert if non-nil.
func injServe(t *testing.T, cert *tls.Certificate, h func(w http.ResponseWriter, r *http.Request)) *injService {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &injService{port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s", r.Method, r.URL, r.Proto)
		for k, vs := range r.Header {
			fmt.Fprintf(&b, " %s=%s", k, strings.Join(vs, ","))
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, b.String())
		s.mu.Unlock()
		h(w, r)
	})}
	if cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}}
		go srv.ServeTLS(ln, "", "")
	} else {
		go srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close() })
	return s
}

// injCA makes a CA and a certificate for 127.0.0.1 signed by it; it
// returns the CA's PEM and the leaf.
func injCA(t *testing.T) (string, *tls.Certificate) {
	t.Helper()
	return injCAFor(t, "127.0.0.1")
}

// injCAFor is injCA with a certificate for host, an IP or a DNS name.
func injCAFor(t *testing.T, host string) (string, *tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "inject e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(host); ip != nil {
		leaf.IPAddresses = []net.IP{ip}
	} else {
		leaf.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		&tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// injToken is a GitHub-shaped token: ghp_ and 36 random letters and digits.
func injToken(t *testing.T) string {
	t.Helper()
	const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 36)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = abc[int(b[i])%len(abc)]
	}
	return "ghp_" + string(b)
}

// injAPI is the service that requires the real token; it echoes the
// Authorization it got, which the proxy must redact before the sandbox
// sees it.
func injAPI(t *testing.T, cert *tls.Certificate, real string) *injService {
	return injServe(t, cert, injAPIHandler(real))
}

// injAPIHandler answers a request with the real token by echoing it.
func injAPIHandler(real string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+real {
			http.Error(w, "want the real token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "hello; you sent %s", r.Header.Get("Authorization"))
	}
}

// TestInjectGateway: a server in a sandbox of `mcpbox serve` holds only a
// placeholder of its token (variable, file, /proc/self/environ, its
// memory through /proc/self/mem), calls
// the loopback API that requires the real token and succeeds, and cannot
// read the token back from the API's echo; the placeholder sent to
// another allowed host (plain HTTP, or another secret's host) is refused
// before it leaves and audited as an exfiltration attempt; the audit
// names each injection (secret, host, port, sandbox; and the call's own
// record the secrets it used) and never a value.
func TestInjectGateway(t *testing.T) {
	caPEM, cert := injCA(t)
	realT, realU := injToken(t), injToken(t)
	api := injAPI(t, cert, realT)
	other := injServe(t, cert, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other") })
	plain := injServe(t, nil, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "plain") })
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "audit: {jsonl: ./audit.jsonl}\n", fmt.Sprintf(`      output: {}
    tools: {allow: ["*"]}
    network:
      egress: [{host: 127.0.0.1, ports: [%d, %d, %d]}]
    secrets:
      T:
        from: env:INJ_T
        inject: {hosts: ["127.0.0.1:%d"], header: Authorization, format: "Bearer {value}"}
      U:
        from: env:INJ_U
        as: file
        inject: {hosts: ["127.0.0.1:%d"], header: X-Api-Key}
`, api.port, other.port, plain.port, api.port, other.port))
		caFile := filepath.Join(s.dir, "ca.pem")
		m.writeFile(t, caFile, caPEM, 0o644)
		g := gwServe(t, m, s.cfg, auTokenEnv+"="+s.token, "INJ_T="+realT, "INJ_U="+realU, "SSL_CERT_FILE="+caFile)
		sess := s.connect(t, g, nil)
		call := func(tool string, args map[string]any) string {
			t.Helper()
			c := await(t, callAsync(sess, tool, args))
			if c.err != nil {
				t.Fatalf("%s: %v", tool, c.err)
			}
			if c.res.IsError {
				t.Fatalf("%s: %s", tool, gwText(c.res))
			}
			return gwText(c.res)
		}
		before := api.count()

		// What the sandbox holds: placeholders only, shaped like the values.
		ph := call("getenv", map[string]any{"text": "T"})
		if ph == realT || len(ph) != len(realT) || !strings.HasPrefix(ph, "ghp_") {
			t.Fatalf("T in the sandbox = %q: want a placeholder of the real token's shape", ph)
		}
		environ := call("read_any", map[string]any{"path": "/proc/self/environ"})
		if !strings.Contains(environ, "T="+ph+"\n") || !strings.Contains(environ, "SSL_CERT_FILE=/run/mcpbox/ca-bundle.pem") {
			t.Fatalf("/proc/self/environ lacks the placeholder or the trust bundle:\n%s", environ)
		}
		phU := call("read_any", map[string]any{"path": "/run/secrets/U"})
		if phU == realU || len(phU) != len(realU) {
			t.Fatalf("/run/secrets/U = %q: want a placeholder", phU)
		}

		// The API gets the real token; the sandbox never sees it, even echoed.
		got := call("http_get", map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d/user", api.port),
			"headers": map[string]string{"Authorization": "Bearer ${T}"}})
		if !strings.HasPrefix(got, "200 hello; you sent Bearer ") || strings.Contains(got, realT) {
			t.Fatalf("the API call through the proxy returned %q", got)
		}
		if n := api.count() - before; n != 1 || !strings.Contains(api.seen(), "Authorization=Bearer "+realT) {
			t.Fatalf("the API got %d requests, want 1 with the real token:\n%s", n, api.seen())
		}

		// The placeholder to another allowed host is refused before it leaves.
		got = call("http_get", map[string]any{"url": fmt.Sprintf("http://127.0.0.1:%d/x", plain.port),
			"headers": map[string]string{"X-Leak": "${T}"}})
		if !strings.HasPrefix(got, "403 ") {
			t.Fatalf("the placeholder to a plain-HTTP host: %q, want 403", got)
		}
		got = call("http_get", map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d/x", other.port),
			"headers": map[string]string{"X-Api-Key": "${T}"}})
		if !strings.HasPrefix(got, "403 ") {
			t.Fatalf("T's placeholder to U's host: %q, want 403", got)
		}
		if plain.count() != 0 || other.count() != 0 {
			t.Fatalf("a refused request reached its host:\nplain: %s\nother: %s", plain.seen(), other.seen())
		}
		// The server's whole memory, after it sent the placeholder and read
		// the echo, holds the placeholders and no value.
		if n := call("mem_dump", map[string]any{"name": "mem.bin"}); n == "0" {
			t.Fatalf("mem_dump wrote nothing")
		}
		dump, err := os.ReadFile(filepath.Join(s.state, "workspaces", auClient, auServer, "output", "mem.bin"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(dump), ph) || !strings.Contains(string(dump), phU) {
			t.Fatalf("the memory dump (%d bytes) lacks the placeholders: not a dump of the server", len(dump))
		}
		if strings.Contains(string(dump), realT) || strings.Contains(string(dump), realU) {
			t.Fatalf("a real value is in the server's memory")
		}
		// mcpbox secrets shows where the secret goes.
		r := s.cli(t, "secrets", "--config", s.cfg)
		if r.code != 0 || !strings.Contains(r.stdout, "proxy") || !strings.Contains(r.stdout, fmt.Sprintf("127.0.0.1:%d", api.port)) {
			t.Fatalf("mcpbox secrets:\n%s", r)
		}
		gwClose(t, sess)
		g.stop(t)

		var inject, exfil []auRecord
		for _, rec := range s.logs(t) {
			switch rec.str("event") {
			case "secret_inject":
				inject = append(inject, rec)
			case "secret_exfiltration":
				exfil = append(exfil, rec)
			}
		}
		if len(inject) != 1 {
			t.Fatalf("want one secret_inject record, got %v", inject)
		}
		d, _ := inject[0]["detail"].(map[string]any)
		if d["secret"] != "T" || d["host"] != "127.0.0.1" || d["port"] != fmt.Sprint(api.port) ||
			d["where"] != "header Authorization" || !strings.HasPrefix(inject[0].str("sandbox"), "sbx_") || inject[0].str("server") != auServer {
			t.Fatalf("secret_inject record: %v", inject[0])
		}
		// The placeholders the sandbox printed are its own, worth nothing:
		// no credential finding (they are shaped like GitHub tokens).
		getenv := s.calls(t, "getenv")
		if len(getenv) == 0 {
			t.Fatal("no getenv call records")
		}
		for _, rec := range getenv {
			if f := rec["findings"]; f != nil {
				t.Errorf("getenv of a placeholder has findings %v: mcpbox's own placeholder taken for a credential", f)
			}
		}
		// The call that used the token names it; the refused ones do not.
		var joined []string
		for _, rec := range s.calls(t, "http_get") {
			d, _ := rec["detail"].(map[string]any)
			if v, ok := d["secrets_injected"].(string); ok {
				joined = append(joined, v)
			}
		}
		if want := fmt.Sprintf("T@127.0.0.1:%d", api.port); len(joined) != 1 || joined[0] != want {
			t.Fatalf("http_get call records name injected secrets %q, want one call with %q", joined, want)
		}
		ports := map[string]bool{}
		for _, rec := range exfil {
			d, _ := rec["detail"].(map[string]any)
			if d["secret"] != "T" || rec.str("decision") != "deny" {
				t.Fatalf("secret_exfiltration record: %v", rec)
			}
			ports[fmt.Sprint(d["port"])] = true
		}
		if !ports[fmt.Sprint(plain.port)] || !ports[fmt.Sprint(other.port)] {
			t.Fatalf("want exfiltration records for ports %d and %d, got %v", plain.port, other.port, exfil)
		}
		// No value anywhere in the audit: not in the store, not in the JSONL copy.
		all := s.cli(t, "logs", "--json", "--config", s.cfg).stdout
		jsonl, err := os.ReadFile(filepath.Join(s.dir, "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{realT, realU} {
			if strings.Contains(all, v) || strings.Contains(string(jsonl), v) {
				t.Fatalf("a real value is in the audit")
			}
		}
	})
}

// TestInjectExecPolicy: `mcpbox exec --policy` injects too; curl in the
// sandbox, trusting the system bundle path (where the sandbox's bundle
// with the proxy CA is bound), reaches the API with the placeholder.
func TestInjectExecPolicy(t *testing.T) {
	caPEM, cert := injCA(t)
	realT := injToken(t)
	api := injAPI(t, cert, realT)
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		caFile := filepath.Join(dir, "ca.pem")
		m.writeFile(t, caFile, caPEM, 0o644)
		cfg := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfg, fmt.Sprintf(`version: 1
servers:
  s:
    command: [x]
    network: {egress: [{host: 127.0.0.1, ports: [%d]}]}
    secrets:
      T: {from: env:INJ_T, inject: {hosts: ["127.0.0.1:%d"], header: Authorization, format: "Bearer {value}"}}
`, api.port, api.port), 0o644)
		script := fmt.Sprintf(`curl -sS --max-time 20 --cacert /etc/ssl/certs/ca-certificates.crt -H "Authorization: Bearer $T" https://127.0.0.1:%d/; echo
cat /proc/self/environ | tr '\0' '\n' | grep '^T='
grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt
cmp -s /run/mcpbox/ca.pem /etc/ssl/certs/ca-certificates.crt && echo same || echo differ`, api.port)
		ctx := t.Context()
		cmd := m.command(ctx, append(append([]string{"exec", "--policy", cfg}, m.flags...), "--", "sh", "-c", script)...)
		cmd.Env = append(cmd.Env, "INJ_T="+realT, "SSL_CERT_FILE="+caFile)
		out, err := cmd.CombinedOutput()
		got := string(out)
		if err != nil {
			t.Fatalf("%v\n%s", err, got)
		}
		if !strings.Contains(got, "hello; you sent Bearer [REDACTED:T]") {
			t.Fatalf("want the API's answer with the echoed token redacted:\n%s", got)
		}
		if strings.Contains(got, realT) {
			t.Fatalf("the real token reached the sandbox:\n%s", got)
		}
		lines := strings.Split(strings.TrimSpace(got), "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[len(lines)-3], "T=ghp_") || lines[len(lines)-2] != "2" || lines[len(lines)-1] != "differ" {
			t.Fatalf("want the placeholder in the environment and the bundle of the host's CA and the proxy's (2 certificates):\n%s", got)
		}
		if !strings.Contains(api.seen(), "Bearer "+realT) {
			t.Fatalf("the API did not get the real token:\n%s", api.seen())
		}
	})
}

// TestInjectRun: `mcpbox run --policy` injects too: the wrapped server
// holds the placeholder (not redacted on its way to the client: it is no
// secret), reaches the API with the real token, and a placeholder sent
// to another allowed host is refused and logged.
func TestInjectRun(t *testing.T) {
	caPEM, cert := injCA(t)
	realT := injToken(t)
	api := injAPI(t, cert, realT)
	plain := injServe(t, nil, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "plain") })
	bin := goBuild(t, gwServerPkg)
	forEachMode(t, func(t *testing.T, m mode) {
		dir := m.dir(t)
		caFile := filepath.Join(dir, "ca.pem")
		m.writeFile(t, caFile, caPEM, 0o644)
		cfg := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfg, fmt.Sprintf(`version: 1
servers:
  s:
    command: [x]
    network: {egress: [{host: 127.0.0.1, ports: [%d, %d]}]}
    secrets:
      T: {from: env:INJ_T, inject: {hosts: ["127.0.0.1:%d"], header: Authorization, format: "Bearer {value}"}}
`, api.port, plain.port, api.port), 0o644)
		args := append(append([]string{"run", "--policy", cfg}, m.flags...), "--mount", bin+":/opt/bin:ro", "--", "/opt/bin/mcpserver", "-name", "solo")
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := m.command(ctx, args...)
		cmd.Env = append(cmd.Env, "INJ_T="+realT, "SSL_CERT_FILE="+caFile)
		logs := newGWLog()
		cmd.Stderr = logs
		client := mcp.NewClient(&mcp.Implementation{Name: "inject-e2e", Version: "1"}, nil)
		sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: gwLegacy})
		if err != nil {
			gwReap(cmd)
			t.Fatalf("connecting to mcpbox run: %v\n%s", err, logs)
		}
		ph := gwMustCall(t, sess, "getenv", map[string]any{"text": "T"}, "")
		if ph == realT || len(ph) != len(realT) || !strings.HasPrefix(ph, "ghp_") {
			t.Fatalf("T in the sandbox = %q: want a placeholder of the token's shape", ph)
		}
		got := gwMustCall(t, sess, "http_get", map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d/", api.port),
			"headers": map[string]string{"Authorization": "Bearer ${T}"}}, "")
		if got != "200 hello; you sent Bearer [REDACTED:T]" {
			t.Fatalf("the API call through the proxy returned %q", got)
		}
		got = gwMustCall(t, sess, "http_get", map[string]any{"url": fmt.Sprintf("http://127.0.0.1:%d/", plain.port),
			"headers": map[string]string{"X-Leak": "${T}"}}, "")
		if !strings.HasPrefix(got, "403 ") {
			t.Fatalf("the placeholder to a plain-HTTP host: %q, want 403", got)
		}
		gwClose(t, sess)
		gwReap(cmd)
		if plain.count() != 0 {
			t.Fatalf("the refused request reached its host: %s", plain.seen())
		}
		if l := logs.String(); !strings.Contains(l, "exfiltration attempt") || !strings.Contains(l, "secret=T") || strings.Contains(l, realT) {
			t.Fatalf("mcpbox run's log: want the refusal of T, without its value:\n%s", l)
		}
	})
}

// injRandom is n random characters of abc.
func injRandom(t *testing.T, abc string, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = abc[int(b[i])%len(abc)]
	}
	return string(b)
}

// TestInjectAWS: the sandbox holds a fake AWS key pair and session token;
// a request it signs with them reaches an S3-style loopback service that
// verifies SigV4 with the real pair only (test/e2e/testdata/sigv4, written
// apart from mcpbox's re-signing); a presigned URL is refused before it
// leaves; both are audited.
func TestInjectAWS(t *testing.T) {
	caPEM, cert := injCA(t)
	const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	ak, sk, st := "ASIA"+injRandom(t, upper, 16), injRandom(t, b64, 40), injRandom(t, b64, 120)
	s3 := injServe(t, cert, func(w http.ResponseWriter, r *http.Request) {
		if err := sigv4.Verify(r, ak, sk, st); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		fmt.Fprint(w, "s3 ok")
	})
	forEachMode(t, func(t *testing.T, m mode) {
		s := auConfig(t, m, "", fmt.Sprintf(`    tools: {allow: ["*"]}
    network:
      egress: [{host: 127.0.0.1, ports: [%d]}]
    secrets:
      AWS:
        inject:
          hosts: ["127.0.0.1:%d"]
          aws: {access_key_id: env:INJ_AK, secret_access_key: env:INJ_SK, session_token: env:INJ_ST}
`, s3.port, s3.port))
		caFile := filepath.Join(s.dir, "ca.pem")
		m.writeFile(t, caFile, caPEM, 0o644)
		g := gwServe(t, m, s.cfg, auTokenEnv+"="+s.token, "INJ_AK="+ak, "INJ_SK="+sk, "INJ_ST="+st, "SSL_CERT_FILE="+caFile)
		sess := s.connect(t, g, nil)
		call := func(tool string, args map[string]any) string {
			t.Helper()
			c := await(t, callAsync(sess, tool, args))
			if c.err != nil {
				t.Fatalf("%s: %v", tool, c.err)
			}
			if c.res.IsError {
				t.Fatalf("%s: %s", tool, gwText(c.res))
			}
			return gwText(c.res)
		}
		fakeKey := call("getenv", map[string]any{"text": "AWS_ACCESS_KEY_ID"})
		fakeSecret := call("getenv", map[string]any{"text": "AWS_SECRET_ACCESS_KEY"})
		fakeToken := call("getenv", map[string]any{"text": "AWS_SESSION_TOKEN"})
		if fakeKey == ak || len(fakeKey) != len(ak) || !strings.HasPrefix(fakeKey, "ASIA") || fakeSecret == sk || fakeSecret == "" || fakeToken == st || fakeToken == "" {
			t.Fatalf("the sandbox's AWS variables %q, %q, %q: want a fake pair and token", fakeKey, fakeSecret, fakeToken)
		}
		before := s3.count()
		url := fmt.Sprintf("https://127.0.0.1:%d/bucket/key.txt", s3.port)
		if got := call("s3_get", map[string]any{"url": url}); got != "200 s3 ok" {
			t.Fatalf("the SigV4 request through the proxy: %q\nthe service saw: %s", got, s3.seen())
		}
		if got := call("s3_get", map[string]any{"url": url, "presign": true}); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "presigned") {
			t.Fatalf("a presigned URL: %q, want 403 naming it", got)
		}
		if n := s3.count() - before; n != 1 {
			t.Fatalf("the service got %d requests, want 1 (the presigned one refused):\n%s", n, s3.seen())
		}
		gwClose(t, sess)
		g.stop(t)
		var inject, refused int
		for _, rec := range s.logs(t) {
			d, _ := rec["detail"].(map[string]any)
			switch {
			case rec.str("event") == "secret_inject" && d["secret"] == "AWS" && d["where"] == "sigv4":
				inject++
			case rec.str("event") == "secret_refused" && d["secret"] == "AWS" && strings.Contains(fmt.Sprint(d["reason"]), "presigned"):
				refused++
			}
			if s := rec.String(); strings.Contains(s, sk) || strings.Contains(s, st) {
				t.Fatalf("a real AWS value is in the audit")
			}
		}
		if inject != 1 || refused != 1 {
			t.Fatalf("audit: %d sigv4 injections and %d presigned refusals, want 1 and 1", inject, refused)
		}
	})
}
