package redact

import (
	"io"
	"sync"
	"time"
)

// QuietWriter is a Writer for a log stream (a server's stderr): what it
// holds back is written once the stream has been quiet for a while, so
// that the last line a server wrote before it hung shows while it hangs,
// not when it exits. A value written in two pieces with a pause of that
// length between them is not recognised; a log written in one go is
// redacted as by Writer. It is safe for concurrent use.
type QuietWriter struct {
	quiet time.Duration

	mu     sync.Mutex
	w      *Writer     // guarded by mu
	timer  *time.Timer // guarded by mu; nil until the first write
	closed bool        // guarded by mu
}

// QuietWriter returns a QuietWriter redacting into w that flushes after
// quiet without writes.
func (r *Redactor) QuietWriter(w io.Writer, quiet time.Duration) *QuietWriter {
	return &QuietWriter{w: r.Writer(w), quiet: quiet}
}

// Write redacts p and restarts the wait for quiet.
func (q *QuietWriter) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, err := q.w.Write(p)
	if err == nil {
		if q.timer == nil {
			q.timer = time.AfterFunc(q.quiet, q.flush)
		} else {
			q.timer.Reset(q.quiet)
		}
	}
	return n, err
}

func (q *QuietWriter) flush() { _ = q.Flush() } // a failure sticks: the next Write reports it

// Flush writes what is held back now, treating this point as the end of
// the stream (see Writer.Flush): for when the stream has ended.
func (q *QuietWriter) Flush() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	return q.w.Flush()
}

// Close flushes and makes further writes fail. It does not close the
// underlying writer.
func (q *QuietWriter) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.timer != nil {
		q.timer.Stop()
	}
	q.closed = true
	return q.w.Close()
}
