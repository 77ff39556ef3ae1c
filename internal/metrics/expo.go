package metrics

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The Prometheus text exposition format (version 0.0.4), written here
// rather than with github.com/prometheus/client_golang: that library and
// what it pulls in (expvar, procfs, runtime/metrics, protobuf
// descriptors) cost every mcpbox process ~1 ms of package initialisation
// and a larger binary, the CLI's `mcpbox exec` included, which never
// serves metrics (issue 19, docs/performance.md). What mcpbox needs is
// small: counters and histograms with bounded labels, gauges read at
// scrape time, and the Go and process metrics. The tests parse every
// scrape with the Prometheus parser (prometheus/common/expfmt).

// contentType is the text format's.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Metric types, as the TYPE line names them.
const (
	typeCounter   = "counter"
	typeGauge     = "gauge"
	typeHistogram = "histogram"
	typeSummary   = "summary"
)

// vec is a counter or histogram family with label values; its methods are
// safe for concurrent use.
type vec struct {
	name, help, typ string
	labels          []string
	buckets         []float64 // histogram: upper bounds, ascending, +Inf implied

	mu     sync.Mutex
	series map[string]*series // by joined label values; guarded by mu
}

// series is one set of label values of a vec.
type series struct {
	values []string
	value  float64  // counter
	counts []uint64 // histogram: per bucket, not cumulative; the last is +Inf
	count  uint64
	sum    float64
}

func newCounterVec(name, help string, labels ...string) *vec {
	return &vec{name: name, help: help, typ: typeCounter, labels: labels, series: map[string]*series{}}
}

func newHistogramVec(name, help string, buckets []float64, labels ...string) *vec {
	return &vec{name: name, help: help, typ: typeHistogram, labels: labels, buckets: buckets, series: map[string]*series{}}
}

// get returns the series of values, made on first use. Preconditions:
// v.mu is held; len(values) == len(v.labels).
func (v *vec) get(values []string) *series {
	key := strings.Join(values, "\xff")
	s := v.series[key]
	if s == nil {
		s = &series{values: slices.Clone(values)}
		if v.typ == typeHistogram {
			s.counts = make([]uint64, len(v.buckets)+1)
		}
		v.series[key] = s
	}
	return s
}

// add adds d (a counter never goes down: d < 0 or NaN is ignored).
func (v *vec) add(d float64, values ...string) {
	if !(d >= 0) {
		return
	}
	v.mu.Lock()
	v.get(values).value += d
	v.mu.Unlock()
}

func (v *vec) inc(values ...string) { v.add(1, values...) }

// observe adds x to a histogram.
func (v *vec) observe(x float64, values ...string) {
	i, _ := slices.BinarySearch(v.buckets, x) // the first bound >= x: le is inclusive
	v.mu.Lock()
	s := v.get(values)
	s.counts[i]++
	s.count++
	s.sum += x
	v.mu.Unlock()
}

// family snapshots v for a scrape; nil if it has no series yet (as
// client_golang, a family without samples is not written).
func (v *vec) family() *family {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.series) == 0 {
		return nil
	}
	f := &family{name: v.name, help: v.help, typ: v.typ}
	all := make([]*series, 0, len(v.series))
	for _, s := range v.series {
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *series) int { return slices.Compare(a.values, b.values) })
	for _, s := range all {
		labels := make([]label, len(v.labels))
		for i, n := range v.labels {
			labels[i] = label{n, s.values[i]}
		}
		if v.typ != typeHistogram {
			f.add("", s.value, labels...)
			continue
		}
		var cum uint64
		for i, c := range s.counts {
			cum += c
			le := math.Inf(1)
			if i < len(v.buckets) {
				le = v.buckets[i]
			}
			f.add("_bucket", float64(cum), append(slices.Clip(labels), label{"le", formatFloat(le)})...)
		}
		f.add("_sum", s.sum, labels...)
		f.add("_count", float64(s.count), labels...)
	}
	return f
}

// family is one metric family as a scrape writes it.
type family struct {
	name, help, typ string
	samples         []sample
}

type sample struct {
	suffix string // "", "_bucket", "_sum", "_count"
	labels []label
	value  float64
}

type label struct{ name, value string }

func (f *family) add(suffix string, value float64, labels ...label) {
	f.samples = append(f.samples, sample{suffix, labels, value})
}

// gauge is a family of one unlabelled gauge.
func gauge(name, help string, value float64) *family {
	f := &family{name: name, help: help, typ: typeGauge}
	f.add("", value)
	return f
}

// write writes fams in the text format, sorted by name.
func write(w io.Writer, fams []*family) error {
	slices.SortFunc(fams, func(a, b *family) int { return cmp.Compare(a.name, b.name) })
	bw := bufio.NewWriter(w)
	for _, f := range fams {
		bw.WriteString("# HELP " + f.name + " ")
		bw.WriteString(escape(f.help, false))
		bw.WriteString("\n# TYPE " + f.name + " " + f.typ + "\n")
		for _, s := range f.samples {
			bw.WriteString(f.name + s.suffix)
			if len(s.labels) > 0 {
				bw.WriteByte('{')
				for i, l := range s.labels {
					if i > 0 {
						bw.WriteByte(',')
					}
					bw.WriteString(l.name + `="` + escape(l.value, true) + `"`)
				}
				bw.WriteByte('}')
			}
			bw.WriteString(" " + formatFloat(s.value) + "\n")
		}
	}
	return bw.Flush()
}

// escape escapes a HELP text (\ and newline) or a label value (also "),
// and replaces what is not UTF-8, which the format does not allow (a
// label value comes from a configured name or a listed tool: bounded,
// but not checked for UTF-8).
func escape(s string, quote bool) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !strings.ContainsAny(s, "\\\n\"") {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// formatFloat formats as the text format (and client_golang) does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// serve writes fams as the response, gzipped if the client accepts it.
func serve(w http.ResponseWriter, r *http.Request, fams []*family) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	var out io.Writer = w
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		defer gz.Close()
		out = gz
	}
	_ = write(out, fams) // an error here is the client's connection
}

func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
