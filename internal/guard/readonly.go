package guard

import (
	"bytes"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
)

// ReadOnlyHint tells the person running mcpbox, once per server, that
// the server reported a write refused as read-only (EROFS): a server that
// writes beside its code or into its input (server-memory keeps its graph
// in its package dir unless MEMORY_FILE_PATH says otherwise) fails inside
// the sandbox, and the client only sees the server's own error text,
// which does not say what is writable. See is a gateway Filter's
// companion: it looks at each payload a server sends (after redaction);
// a payload without the error text costs one substring search.
type ReadOnlyHint struct {
	log  *slog.Logger
	mu   sync.Mutex
	told map[string]bool // by server name: at most the config's servers
}

// NewReadOnlyHint returns a hint that warns on log.
func NewReadOnlyHint(log *slog.Logger) *ReadOnlyHint {
	return &ReadOnlyHint{log: log, told: map[string]bool{}}
}

// readOnlyText is in the error text of every runtime's EROFS: Node's
// "EROFS: read-only file system, open '/p'", Python's "[Errno 30]
// Read-only file system: '/p'", Go's "open /p: read-only file system",
// Rust's "Read-only file system (os error 30)".
var readOnlyText = []byte("ead-only file system")

// The path a write was refused at: quoted after the text (Node,
// Python), or before ": read-only file system" (Go). Compiled when first
// needed: not by every mcpbox process at start (docs/performance.md).
var (
	readOnlyQuoted = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[^'\n]{0,40}'(/[^'\\]{1,1000})'`) })
	readOnlyBefore = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(/[^\s:'"\\]{1,1000}): [Rr]$`) })
)

// See looks at one payload of server.
func (h *ReadOnlyHint) See(server string, raw []byte) {
	i := bytes.Index(raw, readOnlyText)
	if i < 1 {
		return
	}
	h.mu.Lock()
	told := h.told[server]
	h.told[server] = true
	h.mu.Unlock()
	if told {
		return
	}
	where := "a path"
	if m := readOnlyQuoted().FindSubmatch(raw[i+len(readOnlyText):]); m != nil {
		where = string(m[1])
	} else if m := readOnlyBefore().FindSubmatch(raw[max(0, i-1100):i]); m != nil {
		where = string(m[1])
	}
	h.log.Warn(fmt.Sprintf("server %s could not write to %s: the sandbox shows it read-only (the server's own files, its input, the system); "+
		"writes go to /tmp (HOME is /tmp/home; emptied when the sandbox stops), to /workspace/output when the server has an output dir (filesystem.output; run: --output DIR), and to rw mounts: "+
		"point the server there with the setting or env var that names where it writes (server-memory: MEMORY_FILE_PATH)", server, where))
}
