package redact

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the timer's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestQuietWriterFlushes: a log's last line, held back because it could
// begin a secret form, shows once the stream is quiet, without a Close;
// a value written in one go, or in pieces without that pause, is still
// redacted.
func TestQuietWriterFlushes(t *testing.T) {
	const secret = "s3cret-VALUE-0123456789abcdef"
	var b Book
	if err := b.Add("TOKEN", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	q := b.Redactor().QuietWriter(&out, 50*time.Millisecond)
	defer q.Close()
	q.Write([]byte("starting with " + secret[:10]))
	q.Write([]byte(secret[10:] + "\nlistening on port 8080\n"))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "port 8080") {
		if time.Now().After(deadline) {
			t.Fatalf("the last line was not written while the stream was quiet: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := out.String(); strings.Contains(got, secret[:10]) || !strings.Contains(got, "starting with ") {
		t.Errorf("output %q: want the value redacted", got)
	}
}
