package podagent

import (
	"bytes"
	"io"
	"sort"
	"sync"
)

// minSecretLen is the shortest value the agent redacts from the server's
// stderr: shorter ones ("1", "true") would mark every line, and say too
// little to be worth hiding (redact.MinValueLen).
const minSecretLen = 8

// maxSecretLen is the longest value redacted whole: a longer secret file
// is left to the server's own care (holding output back for it would
// delay the log by as much).
const maxSecretLen = 64 << 10

// redactWriter writes the server's stderr to the container's log with
// the start's secrets (environment values, file contents) replaced by
// [REDACTED:NAME]: the log is kept by the node and shown to whoever may
// read the pod's logs, who need not be allowed its secrets. A value the
// server writes in pieces is caught: output that may begin a value is
// held back until the rest shows whether it does.
type redactWriter struct {
	mu     sync.Mutex
	w      io.Writer
	values []secretValue // longest first, so a value within another is not cut first
	hold   []byte        // output not yet written: it may begin a value
}

type secretValue struct {
	v    []byte
	mark []byte
}

// newRedactWriter returns nil when req holds nothing to redact.
func newRedactWriter(w io.Writer, req StartRequest) *redactWriter {
	rw := &redactWriter{w: w}
	add := func(name string, v []byte) {
		if len(v) >= minSecretLen && len(v) <= maxSecretLen {
			rw.values = append(rw.values, secretValue{v: v, mark: []byte("[REDACTED:" + name + "]")})
		}
	}
	for k, v := range req.Env {
		add(k, []byte(v))
	}
	for name, data := range req.Files {
		add(name, data)
		// A file's content without its final newline, as a value read
		// from it is usually printed.
		if t := bytes.TrimRight(data, "\r\n"); len(t) < len(data) {
			add(name, t)
		}
	}
	if len(rw.values) == 0 {
		return nil
	}
	sort.SliceStable(rw.values, func(i, j int) bool { return len(rw.values[i].v) > len(rw.values[j].v) })
	return rw
}

func (rw *redactWriter) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	buf := append(rw.hold, p...)
	cut := rw.cut(buf)
	out := rw.replace(bytes.Clone(buf[:cut]))
	rw.hold = append([]byte(nil), buf[cut:]...)
	if _, err := rw.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// cut is where b may be cut: what follows may begin a value (a proper
// prefix of one at b's end, or "AB" of a value "ABC" while "AB" is a value
// too), and no whole value spans it.
func (rw *redactWriter) cut(b []byte) int {
	cut := len(b) - rw.partial(b)
	for moved := true; moved; {
		moved = false
		for _, s := range rw.values {
			for from := max(0, cut-len(s.v)+1); from < cut; {
				i := bytes.Index(b[from:], s.v)
				if i < 0 || from+i >= cut {
					break
				}
				if at := from + i; at+len(s.v) > cut {
					cut, moved = at, true
					break
				}
				from += i + 1
			}
		}
	}
	return cut
}

// replace replaces every whole value in b.
func (rw *redactWriter) replace(b []byte) []byte {
	for _, s := range rw.values {
		if bytes.Contains(b, s.v) {
			b = bytes.ReplaceAll(b, s.v, s.mark)
		}
	}
	return b
}

// partial is the length of the longest suffix of b that is a proper
// prefix of a value.
func (rw *redactWriter) partial(b []byte) int {
	longest := len(rw.values[0].v) - 1
	for p := max(0, len(b)-longest); p < len(b); p++ {
		for _, s := range rw.values {
			if len(b)-p < len(s.v) && bytes.HasPrefix(s.v, b[p:]) {
				return len(b) - p
			}
		}
	}
	return 0
}

// Close writes what was held back: the server's stderr has ended, so it
// began no value.
func (rw *redactWriter) Close() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	_, err := rw.w.Write(rw.hold)
	rw.hold = nil
	return err
}
