package sandbox

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/egress"
)

// TestImageBundles: the trust bundle covers the files an image's usual
// bundle paths lead to, their links followed as inside the sandbox and
// never out of the image; links to files the sandbox synthesizes or to
// directories it provides, and links that climb out, are not followed
// there; an image with no bundle and no /etc/ssl gets the common path.
func TestImageBundles(t *testing.T) {
	type entry struct{ path, link string } // link "": a file; "/": a directory
	cases := []struct {
		name          string
		tree          []entry
		cover, create []string
	}{
		{"alpine: a file and a relative link to it", []entry{
			{"etc/ssl/certs/ca-certificates.crt", ""},
			{"etc/ssl/cert.pem", "certs/ca-certificates.crt"},
		}, []string{"/etc/ssl/certs/ca-certificates.crt"}, nil},
		{"fedora: absolute links into /etc/pki/ca-trust, /etc/ssl/certs a link", []entry{
			{"etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", ""},
			{"etc/pki/tls/certs/ca-bundle.crt", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"},
			{"etc/ssl/certs", "/etc/pki/tls/certs"},
		}, []string{"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"}, nil},
		{"a bundle under /usr", []entry{
			{"usr/share/ca/bundle.pem", ""},
			{"etc/ssl/cert.pem", "../../usr/share/ca/bundle.pem"},
		}, []string{"/usr/share/ca/bundle.pem"}, nil},
		{"hostile links: synthesized, sandbox-provided, out of the root", []entry{
			{"etc/passwd", ""},
			{"etc/ssl/cert.pem", "/etc/passwd"},
			{"tmp/x.pem", ""},
			{"etc/ssl/ca-bundle.pem", "/tmp/x.pem"},
			{"etc/pki/tls/cacert.pem", "../../../../../../../etc/hostname"},
		}, nil, nil},
		{"a directory where a bundle would be", []entry{
			{"etc/ssl/certs/ca-certificates.crt", "/"},
		}, nil, nil},
		{"no bundle, no /etc/ssl: the common path", []entry{
			{"etc/os-release", ""},
		}, nil, []string{systemBundle}},
		{"no /etc at all", nil, nil, []string{systemBundle}},
		{"/etc a link: the sandbox's /etc is its own", []entry{
			{"private/etc/ssl/certs/ca-certificates.crt", ""},
			{"etc", "private/etc"},
		}, nil, []string{systemBundle}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, e := range tc.tree {
				p := filepath.Join(root, e.path)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				var err error
				switch e.link {
				case "":
					err = os.WriteFile(p, []byte("bundle"), 0o644)
				case "/":
					err = os.Mkdir(p, 0o755)
				default:
					err = os.Symlink(e.link, p)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			cover, create, err := imageBundles(root)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cover, tc.cover) || !slices.Equal(create, tc.create) {
				t.Errorf("cover %q create %q, want %q %q", cover, create, tc.cover, tc.create)
			}
		})
	}
}

// nopInjector intercepts nothing: the sandbox only needs an Injector for
// its trust bundle to be bound.
type nopInjector struct{}

func (nopInjector) Intercepts(string, int) bool { return false }
func (nopInjector) Request(*http.Request, egress.Target) (func(*http.Response) error, error) {
	return nil, nil
}

// TestImageRootTrustBundle: in a sandbox whose system view is an image,
// the trust bundle is what the image's bundle paths show (a file, a
// relative link to it, an absolute link into /etc/pki), and an image
// with none gets it at the common path; the image's own bundle bytes and
// the sandbox's synthesized /etc files stay out of it.
func TestImageRootTrustBundle(t *testing.T) {
	requireSandbox(t)
	ca, err := egress.NewCA("mcpbox test CA")
	if err != nil {
		t.Fatal(err)
	}
	const bundle = "mcpbox-trust-bundle"
	run := func(root string, args ...string) []string {
		spec := quick(append([]string{"rootprobe"}, args...)...)
		spec.Root = root
		spec.Env = []string{"PATH=/bin"}
		spec.Network = Network{Rules: []egress.Rule{{Host: "127.0.0.1", Ports: []int{9}}}, Injector: nopInjector{}, CA: ca, TrustBundle: []byte(bundle)}
		return runProbe(t, spec)
	}

	root := imageRoot(t)
	for p, link := range map[string]string{
		"etc/ssl/certs/ca-certificates.crt":                "",
		"etc/ssl/cert.pem":                                 "certs/ca-certificates.crt",
		"etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem": "",
		"etc/pki/tls/certs/ca-bundle.crt":                  "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if link == "" {
			err = os.WriteFile(full, []byte("image-bundle"), 0o644)
		} else {
			err = os.Symlink(link, full)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	got := run(root, "read:/etc/ssl/cert.pem", "read:/etc/ssl/certs/ca-certificates.crt",
		"read:/etc/pki/tls/certs/ca-bundle.crt", "read:/run/mcpbox/ca-bundle.pem", "read:/etc/os-release", "read:/etc/hostname")
	want := []string{
		"read /etc/ssl/cert.pem: " + bundle,
		"read /etc/ssl/certs/ca-certificates.crt: " + bundle,
		"read /etc/pki/tls/certs/ca-bundle.crt: " + bundle,
		"read /run/mcpbox/ca-bundle.pem: " + bundle,
		"read /etc/os-release: IMAGE",
		"read /etc/hostname: mcpbox",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("image with bundles (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")); string(b) != "image-bundle" {
		t.Fatalf("the image's bundle on the host became %q", b)
	}

	got = run(imageRoot(t), "read:/etc/ssl/certs/ca-certificates.crt", "read:/etc/os-release")
	want = []string{"read /etc/ssl/certs/ca-certificates.crt: " + bundle, "read /etc/os-release: IMAGE"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("image without a bundle (-want +got):\n%s", diff)
	}
}
