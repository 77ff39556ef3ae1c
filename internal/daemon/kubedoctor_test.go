package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/config"
)

// doctorAPI answers what doctor asks a cluster: the version, access
// reviews (allowed; the namespaces asked about recorded), the dry-run
// ConfigMap create, the NetworkPolicy API and runtime classes.
type doctorAPI struct {
	mu  sync.Mutex
	nss map[string]bool // namespaces of the access reviews
	rcs []string        // runtime classes read
}

func (a *doctorAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/version":
		io.WriteString(w, `{"gitVersion":"v1.37.2"}`)
	case strings.HasSuffix(r.URL.Path, "/selfsubjectaccessreviews"):
		var rev map[string]any
		_ = json.NewDecoder(r.Body).Decode(&rev)
		ra, _ := rev["spec"].(map[string]any)["resourceAttributes"].(map[string]any)
		a.mu.Lock()
		a.nss[fmt.Sprint(ra["namespace"])] = true
		a.mu.Unlock()
		rev["status"] = map[string]any{"allowed": true}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(rev)
	case strings.Contains(r.URL.Path, "/runtimeclasses/"):
		a.mu.Lock()
		a.rcs = append(a.rcs, r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
		a.mu.Unlock()
		io.WriteString(w, "{}")
	case r.Method == http.MethodPost:
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "{}")
	default:
		io.WriteString(w, "{}")
	}
}

// TestKubeDoctorEachNamespace: doctor checks every cluster and namespace
// the config's servers run pods in, each once: the top-level backend's
// and a server's own (backend: {namespace: ...}), not a local or url
// server's; each namespace's runtime classes and agent settings.
func TestKubeDoctorEachNamespace(t *testing.T) {
	api := &doctorAPI{nss: map[string]bool{}}
	srv := httptest.NewTLSServer(api)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]\n"+
		"users: [{name: u, user: {token: t0123456789}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n", srv.URL, ca)
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "version: 1\nbackend: {kind: kubernetes, namespace: mcp, kubeconfig: kubeconfig, image: r/b:1}\nservers:\n" +
		"  a:\n    command: [a]\n" +
		"  b:\n    command: [b]\n    backend: {namespace: other, runtime_class: gvisor, agent_image: r/agent:1}\n" +
		"  c:\n    command: [c]\n    backend: {namespace: other}\n" +
		"  d:\n    command: [d]\n    backend: {kind: local}\n" +
		"  e:\n    url: https://mcp.example/mcp\n"
	c, err := config.Load(filepath.Join(dir, "mcpbox.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	ok, err := KubeDoctor(ctx, c, dir, &out)
	if err != nil || !ok {
		t.Fatalf("doctor: %v %v\n%s", ok, err, &out)
	}
	got := out.String()
	for _, want := range []string{"namespace mcp (kubeconfig kubeconfig):\n", "namespace other (kubeconfig kubeconfig):\n",
		"runtimeclass   ok      gvisor exists", "from backend.agent_image r/agent:1", "not copied (no backend.agent_image)"} {
		if !strings.Contains(got, want) {
			t.Errorf("doctor's output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "namespace other ("); n != 1 {
		t.Errorf("namespace other checked %d times:\n%s", n, got)
	}
	if n := strings.Count(got, "runtimeclass"); n != 1 {
		t.Errorf("%d runtime class lines, want gvisor's:\n%s", n, got)
	}
	if n := strings.Count(got, "rbac           ok"); n != 2 {
		t.Errorf("%d rbac lines, want one per namespace:\n%s", n, got)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if !api.nss["mcp"] || !api.nss["other"] || len(api.nss) != 2 {
		t.Errorf("access reviews in %v, want mcp and other", api.nss)
	}
	if len(api.rcs) != 1 || api.rcs[0] != "gvisor" {
		t.Errorf("runtime classes read: %v", api.rcs)
	}
}
