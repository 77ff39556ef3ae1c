package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// injImage is an image of the test MCP server whose own trust bundles
// hold an unrelated CA (otherCA): Alpine's layout (a file and
// /etc/ssl/cert.pem a relative link to it) and Fedora's (ca-bundle.crt an
// absolute link into /etc/pki/ca-trust); /app/other-ca.pem holds the same
// CA at a path no TLS stack takes for a system bundle.
func injImage(t *testing.T, otherCA string) v1.Image {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(goBuild(t, gwServerPkg), "mcpserver"))
	if err != nil {
		t.Fatal(err)
	}
	return imBuild(t, []imEntry{
		{"usr/", "", nil}, {"usr/local/", "", nil}, {"usr/local/bin/", "", nil}, {"usr/local/bin/mcpserver", "", body},
		{"etc/", "", nil}, {"etc/ssl/", "", nil}, {"etc/ssl/certs/", "", nil},
		{"etc/ssl/certs/ca-certificates.crt", "", []byte(otherCA)},
		{"etc/ssl/cert.pem", "certs/ca-certificates.crt", nil},
		{"etc/pki/", "", nil}, {"etc/pki/ca-trust/", "", nil}, {"etc/pki/ca-trust/extracted/", "", nil}, {"etc/pki/ca-trust/extracted/pem/", "", nil},
		{"etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "", []byte(otherCA)},
		{"etc/pki/tls/", "", nil}, {"etc/pki/tls/certs/", "", nil},
		{"etc/pki/tls/certs/ca-bundle.crt", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", nil},
		{"app/", "", nil}, {"app/other-ca.pem", "", []byte(otherCA)},
	}, v1.Config{Entrypoint: []string{"mcpserver"}, Cmd: []string{"-name", "inject-image"},
		Env: []string{"PATH=/usr/local/bin"}, WorkingDir: "/app", User: "1000"})
}

// TestInjectImage: a server run from an image, with its token injected
// at the proxy, reaches the API that requires the real token through a
// TLS client that trusts only a system bundle path of the image (as
// tools that ignore SSL_CERT_FILE do): each of the image's bundle paths,
// links included, shows the sandbox's bundle with the proxy CA, not the
// image's own; a path that is no bundle path keeps the image's bytes and
// the proxy is not trusted there.
func TestInjectImage(t *testing.T) {
	host := imRegistry(t)
	caPEM, cert := injCA(t)
	otherCA, _ := injCA(t)
	realT := injToken(t)
	api := injAPI(t, cert, realT)
	forEachMode(t, func(t *testing.T, m mode) {
		ref := host + "/test/inject-" + m.name + ":v1"
		imPush(t, ref, injImage(t, otherCA))
		dir := m.dir(t)
		var b strings.Builder
		fmt.Fprintf(&b, "version: 1\nstate_dir: %q\n", filepath.Join(dir, "state"))
		if !m.root() {
			b.WriteString("sandbox: {require: [userns, mountns, pidns, netns, seccomp, landlock, idmap]}\n")
		}
		fmt.Fprintf(&b, `servers:
  img:
    image: %q
    image_insecure: true
    tools: {allow: ['*']}
    network:
      egress: [{host: 127.0.0.1, ports: [%d]}]
    secrets:
      T:
        from: env:INJ_T
        inject: {hosts: ["127.0.0.1:%d"], header: Authorization, format: "Bearer {value}"}
`, ref, api.port, api.port)
		cfg := filepath.Join(dir, "mcpbox.yaml")
		m.writeFile(t, cfg, b.String(), 0o644)
		caFile := filepath.Join(dir, "ca.pem")
		m.writeFile(t, caFile, caPEM, 0o644)

		sess, _ := imServe(t, m, cfg, "INJ_T="+realT, "SSL_CERT_FILE="+caFile)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		bundle, err := gwCall(ctx, sess, "read_any", map[string]any{"path": "/run/mcpbox/ca-bundle.pem"})
		if err != nil || !strings.Contains(bundle, strings.TrimSpace(caPEM)) || strings.Count(bundle, "BEGIN CERTIFICATE") != 2 {
			t.Fatalf("/run/mcpbox/ca-bundle.pem: %v\n%s", err, bundle)
		}
		before := api.count()
		for _, p := range []string{"/etc/ssl/cert.pem", "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"} {
			if got, err := gwCall(ctx, sess, "read_any", map[string]any{"path": p}); err != nil || got != bundle {
				t.Fatalf("%s in the sandbox is not the sandbox's bundle: %v\n%s", p, err, got)
			}
			got, err := gwCall(ctx, sess, "http_get", map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d/user", api.port),
				"headers": map[string]string{"Authorization": "Bearer ${T}"}, "ca_file": p})
			if err != nil || !strings.HasPrefix(got, "200 hello; you sent Bearer ") || strings.Contains(got, realT) {
				t.Fatalf("trusting only %s: %q, %v", p, got, err)
			}
		}
		if n := api.count() - before; n != 3 || !strings.Contains(api.seen(), "Authorization=Bearer "+realT) {
			t.Fatalf("the API got %d requests, want 3 with the real token", n)
		}
		// The control: trusting only the image's own CA, the proxy is not
		// trusted (so the bound bundle is what made the calls work).
		if got, err := gwCall(ctx, sess, "read_any", map[string]any{"path": "/app/other-ca.pem"}); err != nil || got != otherCA {
			t.Fatalf("/app/other-ca.pem: %v %q", err, got)
		}
		got, err := gwCall(ctx, sess, "http_get", map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d/user", api.port), "ca_file": "/app/other-ca.pem"})
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("trusting only the image's CA: %q, %v; want a certificate error", got, err)
		}
		if api.count()-before != 3 {
			t.Fatal("the API got a request the client could not have verified")
		}
	})
}
