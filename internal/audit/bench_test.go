package audit

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"
)

func benchStore(b *testing.B, queue int) *Store {
	b.Helper()
	s, err := Open(Options{
		Path:      filepath.Join(b.TempDir(), "audit.db"),
		QueueSize: queue,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkInsert is the sustained rate: each iteration adds 10,000 call
// records and waits for them to be committed.
func BenchmarkInsert(b *testing.B) {
	const perIter = 10000
	s := benchStore(b, 0)
	recs := make([]Record, perIter)
	for i := range recs {
		recs[i] = callRecord(i)
	}
	ctx := context.Background()
	start := time.Now()
	for b.Loop() {
		for _, r := range recs {
			s.Add(r)
		}
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	total := float64(s.Stats().Committed)
	b.ReportMetric(total/time.Since(start).Seconds(), "records/s")
}

// BenchmarkAdd is the caller's cost of one Add with room in the queue:
// copying and redacting the record, no disk.
func BenchmarkAdd(b *testing.B) {
	s := benchStore(b, 1<<16)
	r := callRecord(1)
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		s.Add(r)
		if n++; n == 1<<15 { // drain outside the timer so Add never waits
			b.StopTimer()
			if err := s.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			n = 0
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(s.Stats().Waited), "waited")
}

// BenchmarkSubmit is what a call waits for its record: Submit and Wait,
// one caller at a time (a commit and its fsync each), and from
// 8×GOMAXPROCS goroutines (records queued during a commit share the
// next one).
func BenchmarkSubmit(b *testing.B) {
	r := callRecord(1)
	ctx := context.Background()
	b.Run("sequential", func(b *testing.B) {
		s := benchStore(b, 0)
		for b.Loop() {
			if err := s.Submit(r).Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := benchStore(b, 0)
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Submit(r).Wait(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
