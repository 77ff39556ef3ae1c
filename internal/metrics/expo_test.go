package metrics

import (
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"mcpbox/internal/audit"
)

// TestExpositionParses: label values with every character the format
// escapes, histogram buckets at and beyond their bounds, and the types
// of the families come back from the Prometheus parser as written.
func TestExpositionParses(t *testing.T) {
	odd := "a\"b\\c\nd{e}=f,g é"
	const notUTF8 = "bad\xff"
	m := New(Options{
		Servers:   []string{"fs", odd, notUTF8},
		KnownTool: func(string, string) bool { return true },
	})
	for _, d := range []time.Duration{0, 5 * time.Millisecond, 7 * time.Millisecond, time.Hour} {
		m.Observe(audit.Record{Event: audit.EventCall, Server: odd, Tool: odd, Decision: "allow", Outcome: audit.OutcomeOK, Duration: d})
	}
	m.Observe(audit.Record{Event: audit.EventSandboxStart, Server: notUTF8})
	fams := scrape(t, m.Handler())
	if got := value(fams, "mcpbox_sandbox_events_total", map[string]string{"server": "bad\uFFFD"}); got != 1 {
		t.Errorf("a server name that is not UTF-8: %v events under its replacement", got)
	}
	f := fams["mcpbox_call_duration_seconds"]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM || len(f.Metric) != 1 {
		t.Fatalf("call duration: %v", f)
	}
	for _, lp := range f.Metric[0].Label {
		if lp.GetValue() != odd {
			t.Errorf("label %s = %q, want %q", lp.GetName(), lp.GetValue(), odd)
		}
	}
	h := f.Metric[0].GetHistogram()
	if h.GetSampleCount() != 4 || math.Abs(h.GetSampleSum()-3600.012) > 1e-9 {
		t.Errorf("count %d sum %v, want 4 and 3600.012", h.GetSampleCount(), h.GetSampleSum())
	}
	// le is inclusive: 0 and 5 ms are in the 0.005 bucket, 7 ms in 0.01;
	// the hour only in +Inf (which the parser folds into the count).
	want := map[float64]uint64{.005: 2, .01: 3, 120: 3}
	for _, b := range h.Bucket {
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
	types := map[string]dto.MetricType{
		"mcpbox_calls_total":            dto.MetricType_COUNTER,
		"mcpbox_audit_records_total":    dto.MetricType_COUNTER,
		"go_gc_duration_seconds":        dto.MetricType_SUMMARY,
		"go_goroutines":                 dto.MetricType_GAUGE,
		"go_memstats_alloc_bytes_total": dto.MetricType_COUNTER,
		"process_cpu_seconds_total":     dto.MetricType_COUNTER,
	}
	for name, typ := range types {
		if fams[name] == nil || fams[name].GetType() != typ {
			t.Errorf("%s: %v, want type %v", name, fams[name], typ)
		}
	}
	// Families without samples are not written (as client_golang).
	if fams["mcpbox_approvals_total"] != nil {
		t.Error("an empty family was written")
	}
}

// TestRuntimeAndProcess: the Go and process metrics are there with values
// this process can check.
func TestRuntimeAndProcess(t *testing.T) {
	// At least 50 ms of CPU, so that /proc's 10 ms ticks show some.
	var ru syscall.Rusage
	for end, x := time.Now().Add(5*time.Second), 0; time.Now().Before(end); x++ {
		if x%100000 == 0 {
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			if time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) > 50*time.Millisecond {
				break
			}
		}
	}
	fams := scrape(t, New(Options{}).Handler())
	if got := value(fams, "go_goroutines", nil); got < 1 {
		t.Errorf("go_goroutines %v", got)
	}
	if got := value(fams, "go_memstats_heap_inuse_bytes", nil); got < 1<<10 {
		t.Errorf("go_memstats_heap_inuse_bytes %v", got)
	}
	if got := value(fams, "go_info", map[string]string{"version": ""}); got != 0 {
		t.Errorf("go_info with an empty version: %v", got)
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc:", err)
	}
	if got := value(fams, "process_open_fds", nil); got < 3 {
		t.Errorf("process_open_fds %v", got)
	}
	if got := value(fams, "process_resident_memory_bytes", nil); got < 1<<20 {
		t.Errorf("process_resident_memory_bytes %v", got)
	}
	if got := value(fams, "process_cpu_seconds_total", nil); got <= 0 || got > 3600 {
		t.Errorf("process_cpu_seconds_total %v", got)
	}
	// The start time is that of this test binary: within the last hour
	// (and the clock's granularity of /proc, 10 ms, in the future).
	start := value(fams, "process_start_time_seconds", nil)
	if now := float64(time.Now().Unix()); start < now-3600 || start > now+1 {
		t.Errorf("process_start_time_seconds %v, now %v", start, now)
	}
}

// TestParseStat: the command in /proc/PID/stat may hold spaces and ")".
func TestParseStat(t *testing.T) {
	line := "4242 (a) b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 25 0 0 20 0 3 0 98765 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	st, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := (procStat{utime: 150, stime: 25, starttime: 98765, vsize: 123456789, rss: 2048}); st != want {
		t.Errorf("parseStat = %+v, want %+v", st, want)
	}
	if _, err := parseStat("4242 (short) S 1 2 3"); err == nil {
		t.Error("a short line parsed")
	}
}

// TestGzip: a scraper that accepts gzip gets it, one that does not gets
// plain text; both parse.
func TestGzip(t *testing.T) {
	m := New(Options{Servers: []string{"fs"}})
	m.Observe(audit.Record{Event: audit.EventSandboxStart, Server: "fs", Duration: time.Second})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	for _, enc := range []string{"gzip", "gzip;q=0", ""} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Accept-Encoding", enc) // set, even empty: no transparent gzip
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body io.Reader = resp.Body
		gz := resp.Header.Get("Content-Encoding") == "gzip"
		if gz != (enc == "gzip") {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q", enc, resp.Header.Get("Content-Encoding"))
		}
		if gz {
			if body, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
			t.Errorf("Content-Type %q", ct)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("Accept-Encoding %q: %v", enc, err)
		}
		if got := value(fams, "mcpbox_sandbox_start_seconds", nil); got != 1 {
			t.Errorf("Accept-Encoding %q: %v start samples", enc, got)
		}
	}
}
