package launch

import (
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"mcpbox/internal/kube"
	"mcpbox/internal/redact"
	"mcpbox/internal/track"
)

// flakyDeletes answers DELETE with 503 the first fail times for each
// path, then 200, and counts them.
type flakyDeletes struct {
	mu    sync.Mutex
	fail  int
	tries map[string]int
}

func (f *flakyDeletes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method != http.MethodDelete {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	f.tries[r.URL.Path]++
	if f.tries[r.URL.Path] <= f.fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte(`{"kind":"Status","status":"Success"}`))
}

func (f *flakyDeletes) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries[path]
}

// A pod whose delete fails (the API out of reach a while) is deleted at
// a later try: it holds the server's secrets, and was left running until
// serve ended.
func TestKubeDeleteRetried(t *testing.T) {
	deleteRetry, deleteEvery = 5*time.Second, 50*time.Millisecond
	t.Cleanup(func() { deleteRetry, deleteEvery = 5*time.Minute, 10*time.Second })
	f := &flakyDeletes{fail: 2, tries: map[string]int{}}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	c, err := kube.New(kube.Config{Server: srv.URL, CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	k := &Kube{o: KubeOptions{Name: "s", Client: c, Namespace: "ns", Book: &redact.Book{}}, log: slog.New(slog.DiscardHandler)}
	in := &kubeInstance{k: k, pod: "p1", tls: "p1-tls", rec: track.NewSandbox()}
	in.deleteObjects(t.Context())
	deadline := time.Now().Add(5 * time.Second)
	for f.count("/api/v1/namespaces/ns/pods/p1") < 3 || f.count("/api/v1/namespaces/ns/secrets/p1-tls") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("deletes tried: %v, want each until it succeeded (3 times)", f.tries)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := f.count("/api/v1/namespaces/ns/pods/p1"); n != 3 {
		t.Errorf("the pod's delete was tried %d times, want 3 (no more once it succeeded)", n)
	}
}
