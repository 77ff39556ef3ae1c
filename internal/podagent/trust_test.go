//go:build linux

package podagent

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"mcpbox/internal/kube"
)

// imageRoot makes an image root with files (path: content) and links
// (path: target).
func imageRoot(t *testing.T, files, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestWriteTrust: the trust container writes the image's own bundle
// followed by the CA, and the CA alone, mode 0444, with no temporary
// file left; the image's bundle is the first system path that is a
// regular file inside the image, its links followed inside the image
// (an absolute link, "..", never out to the host's files), a directory
// or a FIFO there skipped without hanging; no bundle: the CA alone; a
// CA value with a key, text or nothing is refused, as is a huge bundle.
func TestWriteTrust(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	caPEM := ca.CAPEM()
	_, keyPEM, err := ca.IssuePod("p")
	if err != nil {
		t.Fatal(err)
	}
	const own = "-----BEGIN CERTIFICATE-----\nimage's own\n-----END CERTIFICATE-----" // no final newline
	host, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")

	cases := []struct {
		name         string
		files, links map[string]string
		fifo         string
		want, from   string
	}{
		{name: "debian", files: map[string]string{"etc/ssl/certs/ca-certificates.crt": own},
			want: own, from: kube.SystemBundles[0]},
		{name: "fedora absolute link", files: map[string]string{"etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem": own},
			links: map[string]string{"etc/pki/tls/certs/ca-bundle.crt": "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"},
			want:  own, from: "/etc/pki/tls/certs/ca-bundle.crt"},
		{name: "alpine relative link", files: map[string]string{"etc/ssl/certs/ca-certificates.crt.real": own},
			links: map[string]string{"etc/ssl/cert.pem": "certs/ca-certificates.crt.real"},
			want:  own, from: "/etc/ssl/cert.pem"},
		{name: "links out of the image stay in it", links: map[string]string{
			"etc/ssl/certs/ca-certificates.crt": "/etc/ssl/certs/ca-certificates.crt",
			"etc/pki/tls/certs/ca-bundle.crt":   "../../../../../../../../etc/ssl/certs/ca-certificates.crt",
			"etc/ssl/cert.pem":                  "/proc/self/root/etc/ssl/certs/ca-certificates.crt"}},
		{name: "directory and fifo skipped", files: map[string]string{"etc/ssl/certs/ca-certificates.crt/x": "", "etc/ssl/cert.pem": own},
			fifo: "etc/pki/tls/certs/ca-bundle.crt", want: own, from: "/etc/ssl/cert.pem"},
		{name: "no bundle"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := imageRoot(t, c.files, c.links)
			if c.fifo != "" {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, c.fifo)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(filepath.Join(root, c.fifo), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			from, err := WriteTrust(dir, root, caPEM, kube.SystemBundles)
			if err != nil || from != c.from {
				t.Fatalf("WriteTrust: from %q, %v; want from %q", from, err, c.from)
			}
			bundle, err := os.ReadFile(filepath.Join(dir, kube.TrustBundleName))
			if err != nil {
				t.Fatal(err)
			}
			want := string(caPEM)
			if c.want != "" {
				want = c.want + "\n" + want
			}
			if string(bundle) != want {
				t.Fatalf("bundle:\n%s\nwant:\n%s", bundle, want)
			}
			if len(host) > 0 && strings.Contains(string(bundle), string(host[:min(len(host), 200)])) {
				t.Fatal("the bundle holds the host's certificates: a link left the image")
			}
			if got, err := os.ReadFile(filepath.Join(dir, kube.TrustCAName)); err != nil || string(got) != string(caPEM) {
				t.Fatalf("%s: %v\n%s", kube.TrustCAName, err, got)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 2 {
				t.Fatalf("the trust dir holds %d entries, want 2", len(ents))
			}
			for _, e := range ents {
				if fi, _ := e.Info(); fi.Mode().Perm() != 0o444 {
					t.Errorf("%s: mode %v, want 0444", e.Name(), fi.Mode())
				}
			}
		})
	}

	root := imageRoot(t, map[string]string{"etc/ssl/certs/ca-certificates.crt": own}, nil)
	for name, bad := range map[string][]byte{
		"a key":        append(append([]byte{}, caPEM...), keyPEM...),
		"text":         append([]byte("hello\n"), caPEM...),
		"empty":        nil,
		"not x509":     []byte(own),
		"trailing txt": append(append([]byte{}, caPEM...), "junk"...),
	} {
		dir := t.TempDir()
		if _, err := WriteTrust(dir, root, bad, kube.SystemBundles); err == nil || !strings.Contains(err.Error(), kube.TrustCAEnv) {
			t.Errorf("%s as the CA: %v, want a refusal naming %s", name, err, kube.TrustCAEnv)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s as the CA: %d files written", name, len(ents))
		}
	}
	huge := imageRoot(t, map[string]string{"etc/ssl/cert.pem": strings.Repeat("x", kube.TrustMaxBundle+1)}, nil)
	if _, err := WriteTrust(t.TempDir(), huge, caPEM, kube.SystemBundles); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a huge image bundle: %v, want a refusal", err)
	}
}
