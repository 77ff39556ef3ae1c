package pkginstall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mcpbox/internal/egress"
)

// internalService stands in for what an address reaches from this host:
// cloud metadata, a loopback service, the LAN. It counts its requests.
func internalService(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		fmt.Fprint(w, "ami-id\ninstance-id\n")
	}))
	t.Cleanup(s.Close)
	return s, &n
}

// TestTarballAtAnAddressRefused: a registry (not trusted) whose packument
// puts a version's tarball at an address (http://169.254.169.254/...,
// here another loopback port) does not get the host to fetch it, nor the
// fetching sandbox's egress to allow it.
func TestTarballAtAnAddressRefused(t *testing.T) {
	svc, hits := internalService(t)
	reg := newFakeRegistry(t, "")
	cfg := NPMConfig{Registry: reg.url()}
	r := &registry{cfg: cfg, client: &http.Client{Timeout: 10 * time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tarball := range []string{svc.URL + "/latest/meta-data/x.tgz", "http://169.254.169.254/latest/meta-data/x.tgz", "http://[::ffff:169.254.169.254]/x.tgz"} {
		v := npmVersion{Version: "1.0.0"}
		v.Dist.Tarball = tarball
		if _, err := r.tarball(ctx, "x", v, "sha512-AAAA"); err == nil || !strings.Contains(err.Error(), "no configured registry") {
			t.Errorf("%s: %v, want a refusal", tarball, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the internal service got %d requests", n)
	}
	// The registry's own host and port (here an address) stay fine.
	v := npmVersion{Version: "1.0.0"}
	v.Dist.Tarball = reg.url() + "x/-/x-1.0.0.tgz"
	if _, err := r.tarball(ctx, "x", v, "sha512-AAAA"); err != nil && strings.Contains(err.Error(), "no configured registry") {
		t.Errorf("the registry's own tarball refused: %v", err)
	}
}

// TestWheelAtAnAddressSkipped: an index page's link to a wheel at an
// address other than the index's is not taken.
func TestWheelAtAnAddressSkipped(t *testing.T) {
	svc, hits := internalService(t)
	sum := sha256.Sum256([]byte("w"))
	var idx *httptest.Server
	idx = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<a href="%s/x-1.0-py3-none-any.whl#sha256=%s">x-1.0-py3-none-any.whl</a>`+"\n", svc.URL, hex.EncodeToString(sum[:]))
		fmt.Fprintf(w, `<a href="%s/files/x-0.9-py3-none-any.whl#sha256=%s">x-0.9-py3-none-any.whl</a>`+"\n", idx.URL, hex.EncodeToString(sum[:]))
	}))
	t.Cleanup(idx.Close)
	in := &Installer{PyPI: PyPIConfig{IndexURL: idx.URL + "/simple/"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	files, _, err := in.pypiFiles(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].version != "0.9" {
		t.Errorf("files %+v: want only the index's own 0.9", files)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the internal service got %d requests", n)
	}
}

// TestTarballAtAPrivateNameRefused: a registry whose packument puts a
// tarball at a host NAME that resolves to a loopback address (localhost
// here, as 169.254.169.254 would be for a name the attacker's DNS
// answers), or that redirects its own tarball URL to such an address,
// does not get the host to fetch it. The configured registry itself, on
// loopback, stays reachable.
func TestTarballAtAPrivateNameRefused(t *testing.T) {
	svc, hits := internalService(t)
	_, svcPort, _ := strings.Cut(strings.TrimPrefix(svc.URL, "http://"), ":")
	reg := newFakeRegistry(t, "")
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, svc.URL+"/latest/meta-data/x.tgz", http.StatusFound)
	}))
	t.Cleanup(redirect.Close)
	in := &Installer{NPM: NPMConfig{Registry: reg.url(), Scopes: map[string]string{"@r": redirect.URL + "/"}}}
	r := in.registry()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tarball := range []string{
		"http://localhost:" + svcPort + "/latest/meta-data/x.tgz",
		redirect.URL + "/@r/x/-/x-1.0.0.tgz", // a configured registry redirecting to an address
	} {
		v := npmVersion{Version: "1.0.0"}
		v.Dist.Tarball = tarball
		_, err := r.tarball(ctx, "x", v, "sha512-AAAA")
		if !errors.Is(err, egress.ErrPrivateAddress) {
			t.Errorf("%s: %v, want a refusal of the address", tarball, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the internal service got %d requests", n)
	}
	// The configured registry's own host and port, an address, stay fine.
	reg.add(t, testPkg{name: "x", version: "1.0.0"})
	tp := reg.url() + "x/-/x-1.0.0.tgz"
	v := npmVersion{Version: "1.0.0"}
	v.Dist.Tarball = tp
	if _, err := r.tarball(ctx, "x", v, sri(reg.tarballs["/x/-/x-1.0.0.tgz"])); err != nil {
		t.Errorf("the registry's own tarball: %v", err)
	}
}

// TestArtifactAddressSpelledAsName: an archive URL whose host the egress
// proxy reads as an address (a trailing dot, inet_aton forms) is an
// address here too. Before, 169.254.169.254. or 2130706433 passed as a
// "name" and became an address rule of the install's egress (a lockfile
// of the project's, for `npm ci` and pod installs, or a packument's
// tarball for the fetching sandbox). A configured registry's own address,
// however spelled, stays trusted.
func TestArtifactAddressSpelledAsName(t *testing.T) {
	cfg := NPMConfig{Registry: "http://127.0.0.1:4873/"}
	for _, bad := range []string{
		"http://169.254.169.254./latest/meta-data/x.tgz",
		"http://127.0.0.1.:6379/x.tgz",
		"http://2130706433:6379/x.tgz",
		"http://0x7f.1:6379/x.tgz",
		"http://127.1:6379/x.tgz",
		"http://0251.0376.0251.0376/x.tgz",
		"http://2852039166/x.tgz",
	} {
		lock := []byte(`{"packages":{"node_modules/x":{"resolved":"` + bad + `"}}}`)
		if r, err := cfg.LockfileRegistryRules(lock); err == nil || !strings.Contains(err.Error(), "no configured registry") {
			t.Errorf("a lockfile resolving to %s: rules %+v, %v; want a refusal", bad, r, err)
		}
	}
	lock := []byte(`{"packages":{"node_modules/x":{"resolved":"http://127.0.0.1.:4873/x/-/x-1.0.0.tgz"}}}`)
	if _, err := cfg.LockfileRegistryRules(lock); err != nil {
		t.Errorf("the configured registry's address with a trailing dot: %v", err)
	}
}
