package credinject

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// serveTCP serves the rig's proxy on a loopback TCP port as well, for
// clients that speak to an HTTP proxy over TCP only.
func (r *rig) serveTCP(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go r.p.Serve(l) // Close (in the rig's cleanup) closes l and ends Serve
	return l.Addr().String()
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	return string(out)
}

// TestRealClients drives the proxy with third-party clients as a server
// in a sandbox would: curl (HTTP/1.1 and HTTP/2) and Python requests, each
// trusting only the proxy's CA and holding only the placeholder.
func TestRealClients(t *testing.T) {
	w := newWorld(t, nil)
	ph := w.ph(t, "GH")
	proxy := "http://" + w.r.serveTCP(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, w.r.ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "https://" + w.a.hostPort() + "/user"
	n := 0
	if _, err := exec.LookPath("curl"); err == nil {
		for _, v := range []string{"--http1.1", "--http2"} {
			out := run(t, nil, "curl", "-sS", v, "--proxy", proxy, "--cacert", caFile,
				"-H", "Authorization: Bearer "+ph, "-w", " %{http_code} %{http_version}", url)
			want := " 200 2"
			if v == "--http1.1" {
				want = " 200 1.1"
			}
			if !strings.HasSuffix(out, want) || !strings.Contains(out, "[REDACTED:GH]") || strings.Contains(out, realA) {
				t.Errorf("curl %s: %q", v, out)
			}
			n++
		}
	} else {
		t.Log("curl not installed")
	}
	if err := exec.Command("python3", "-c", "import requests").Run(); err == nil {
		out := run(t, []string{"REQUESTS_CA_BUNDLE=" + caFile, "HTTPS_PROXY=" + proxy, "NO_PROXY="},
			"python3", "-c", `import requests, sys
r = requests.get(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]}, timeout=10)
print(r.status_code, r.text)`, url, ph)
		if !strings.HasPrefix(out, "200 ") || !strings.Contains(out, "[REDACTED:GH]") || strings.Contains(out, realA) {
			t.Errorf("python requests: %q", out)
		}
		n++
	} else {
		t.Log("python3 requests not installed")
	}
	if n == 0 {
		t.Skip("no third-party HTTP client installed (curl, python3 requests)")
	}
	if got := len(w.r.log.find("inject")); got != n {
		t.Errorf("%d inject events for %d requests", got, n)
	}
}
