package launch

// What a server and its egress proxy write to the gateway's log.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/redact"
)

// egressLogger logs the proxy's decisions, allowed connections at
// allowLevel and the others as warnings. The event is redacted
// (redactEvent) by the caller.
func egressLogger(log *slog.Logger, server string, allowLevel slog.Level) func(egress.Event) {
	return func(ev egress.Event) {
		level := allowLevel
		if ev.Decision != "allow" {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "egress", "server", server, "decision", ev.Decision,
			"host", ev.Host, "port", ev.Port, "reason", ev.Reason)
	}
}

// redactEvent redacts the host name and reason of an egress event before
// they reach the log, the audit or a call's record: a server may try to
// carry a secret out in a DNS name, which the proxy has lower-cased, and
// split into labels if the value is long (redact.Book.Host, Folded).
func redactEvent(book *redact.Book, ev egress.Event) egress.Event {
	if book == nil {
		return ev
	}
	ev.Host, ev.Reason = book.Host(ev.Host), book.Folded(ev.Reason)
	return ev
}

// redactSecretEvent is redactEvent for an event of a secret added at the
// proxy, whose host the sandbox named and whose where holds a header
// name (re-cased on the way).
func redactSecretEvent(book *redact.Book, ev credinject.Event) credinject.Event {
	if book == nil {
		return ev
	}
	ev.Host, ev.Where, ev.Reason = book.Host(ev.Host), book.Folded(ev.Where), book.Folded(ev.Reason)
	return ev
}

// lineWriter prefixes every line a server writes to stderr and caps its
// length, so that one server cannot flood or forge the gateway's log.
type lineWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
	last   string    // the last line written, cut to maxLastLine
	lastAt time.Time // when it was written
	// lastErr is the last line that reads like an error (errorLine), cut
	// to maxLastLine, and lastErrAt when it was written: a runtime's own
	// last words (Node's "Node.js v20.20.2", a stack's last frame) say
	// less than the error above them.
	lastErr   string
	lastErrAt time.Time
}

// maxLastLine bounds the last line Last keeps.
const maxLastLine = 200

// Last is the last line written (after the redactor, its controls
// replaced) if it was written within recent, for the error of a server
// that ended: an older line (a start-up banner) would say nothing of why.
// errLine is the last line that reads like an error, if it was written
// within recent and is not the last line ("" otherwise).
func (lw *lineWriter) Last(recent time.Duration) (last, errLine string) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if time.Since(lw.lastAt) > recent {
		return "", ""
	}
	if time.Since(lw.lastErrAt) <= recent && lw.lastErr != lw.last {
		errLine = lw.lastErr
	}
	return lw.last, errLine
}

// errorLine matches a line that reports an error: Node's "Error
// [ERR_MODULE_NOT_FOUND]: ...", Python's "ModuleNotFoundError: ...",
// Go's "panic: ...", "fatal: ...", "error: ...". A stack frame
// ("    at f (file:1:2)") is not one. It is compiled at first use, not
// at init, which every mcpbox process (exec's too) would pay for.
var errorLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:[A-Za-z_][\w.]*(?:Error|Exception)\b|(?i:error|fatal|panic)\b)`)
})

const maxLogLine = 4096

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLogLine - len(lw.buf)
			lw.buf = append(lw.buf, p[:min(len(p), max(room, 0))]...)
			break
		}
		room := maxLogLine - len(lw.buf)
		lw.buf = append(lw.buf, p[:min(i, max(room, 0))]...)
		lw.flush()
		p = p[i+1:]
	}
	return n, nil
}

// Close writes a last line that had no newline.
func (lw *lineWriter) Close() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if len(lw.buf) > 0 {
		lw.flush()
	}
	return nil
}

func (lw *lineWriter) flush() {
	// C0 and C1 controls and DEL could move the cursor or fake a line of
	// the gateway's own; invalid UTF-8 becomes U+FFFD.
	line := bytes.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, lw.buf)
	fmt.Fprintf(lw.w, "%s%s\n", lw.prefix, line)
	// A line of at most maxLastLine bytes has no more runes: only a
	// longer one is decoded to be cut.
	if len(line) > maxLastLine {
		if r := []rune(string(line)); len(r) > maxLastLine {
			line = []byte(string(r[:maxLastLine-1]) + "…")
		}
	}
	lw.last, lw.lastAt = string(line), time.Now()
	if errorLine().Match(line) {
		lw.lastErr, lw.lastErrAt = lw.last, lw.lastAt
	}
	lw.buf = lw.buf[:0]
}
