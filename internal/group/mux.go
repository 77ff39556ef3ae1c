package group

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Mux is the gateway's end of a supervisor: it splits the supervisor's
// stdout into one stream per member and prefixes what members are sent.
type Mux struct {
	w   io.WriteCloser // the supervisor's stdin
	wmu sync.Mutex

	mu    sync.Mutex
	outs  map[int]*io.PipeWriter // guarded by mu
	exits map[int]int            // guarded by mu
	// exited has a channel per member started and not yet exited, closed
	// when its exit arrives (or it is started again); guarded by mu.
	exited map[int]chan struct{}
	err    error // set when the supervisor's stdout ended; guarded by mu
	done   chan struct{}
}

// ErrGroupEnded is what member streams end with when the group's
// sandbox is gone.
var ErrGroupEnded = errors.New("group sandbox ended")

// NewMux starts reading the supervisor's stdout.
func NewMux(stdin io.WriteCloser, stdout io.Reader) *Mux {
	m := &Mux{w: stdin, outs: map[int]*io.PipeWriter{}, exits: map[int]int{}, exited: map[int]chan struct{}{}, done: make(chan struct{})}
	go m.read(stdout)
	return m
}

// Start starts member i and returns its stdin and stdout. Closing the
// stdin stops the member; its stdout ends when it has exited.
func (m *Mux) Start(i int) (io.WriteCloser, io.ReadCloser, error) {
	r, w := io.Pipe()
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return nil, nil, m.err
	}
	if old := m.outs[i]; old != nil {
		old.CloseWithError(errors.New("member restarted"))
	}
	m.outs[i] = w
	delete(m.exits, i)
	if old := m.exited[i]; old != nil {
		close(old)
	}
	m.exited[i] = make(chan struct{})
	m.mu.Unlock()
	if err := m.send("!start " + strconv.Itoa(i) + "\n"); err != nil {
		return nil, nil, err
	}
	return &memberIn{m: m, prefix: []byte(strconv.Itoa(i) + " "), i: i}, r, nil
}

// Exit returns member i's exit code once its stdout has ended.
func (m *Mux) Exit(i int) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	code, ok := m.exits[i]
	return code, ok
}

// WaitExit waits up to timeout for member i to exit and returns its exit
// code; ok is false when the group's sandbox ended first, or the time ran
// out, or the member was started again meanwhile.
func (m *Mux) WaitExit(i int, timeout time.Duration) (code int, ok bool) {
	m.mu.Lock()
	code, ok = m.exits[i]
	ch := m.exited[i]
	m.mu.Unlock()
	if ok || ch == nil {
		return code, ok
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return m.Exit(i)
	case <-m.done:
		// The exit may have come just before the end.
		return m.Exit(i)
	case <-t.C:
		return 0, false
	}
}

// Close closes the supervisor's stdin: it stops every member and exits.
func (m *Mux) Close() error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	return m.w.Close()
}

// Done is closed when the supervisor's stdout has ended.
func (m *Mux) Done() <-chan struct{} { return m.done }

// WriteTimeout bounds one write to the supervisor: a member that stops
// reading stalls the supervisor, and then the whole group's sandbox is
// given up (its stdin closed) rather than blocking the gateway.
var WriteTimeout = 30 * time.Second

func (m *Mux) send(line string) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	return m.write([]byte(line))
}

// write writes under a deadline when the supervisor's stdin supports one;
// called with wmu held.
func (m *Mux) write(parts ...[]byte) error {
	if f, ok := m.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		if f.SetWriteDeadline(time.Now().Add(WriteTimeout)) == nil {
			defer f.SetWriteDeadline(time.Time{})
		}
	}
	for _, p := range parts {
		if _, err := m.w.Write(p); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				m.w.Close() // the supervisor is stuck: end the group
			}
			return err
		}
	}
	return nil
}

// memberIn prefixes each message (one whole line per Write, as the
// gateway writes them) with the member's index.
type memberIn struct {
	m      *Mux
	prefix []byte
	i      int
	once   sync.Once
}

func (w *memberIn) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, '\n') != len(p)-1 {
		return 0, errors.New("group: a write must be exactly one line")
	}
	w.m.wmu.Lock()
	defer w.m.wmu.Unlock()
	if err := w.m.write(w.prefix, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *memberIn) Close() error {
	var err error
	w.once.Do(func() { err = w.m.send("!stop " + strconv.Itoa(w.i) + "\n") })
	return err
}

func (m *Mux) read(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	var err error
	for {
		var chunk []byte
		chunk, err = r.ReadSlice('\n')
		if len(chunk) > 0 && chunk[0] == '!' {
			m.control(string(bytes.TrimSpace(chunk)))
		} else if len(chunk) > 0 {
			err = m.route(chunk, r, err)
		}
		if err != nil && err != bufio.ErrBufferFull {
			break
		}
	}
	m.mu.Lock()
	m.err = fmt.Errorf("%w: %v", ErrGroupEnded, err)
	for i, w := range m.outs {
		w.CloseWithError(ErrGroupEnded)
		delete(m.outs, i)
	}
	m.mu.Unlock()
	close(m.done)
}

// route copies one line (possibly longer than the buffer) to its member.
func (m *Mux) route(first []byte, r *bufio.Reader, err error) error {
	sp := bytes.IndexByte(first, ' ')
	i := -1
	if sp > 0 {
		if n, aerr := strconv.Atoi(string(first[:sp])); aerr == nil {
			i = n
		}
	}
	m.mu.Lock()
	w := m.outs[i]
	m.mu.Unlock()
	var dst io.Writer = io.Discard
	if w != nil {
		dst = w
	}
	chunk := first[sp+1:]
	for {
		if _, werr := dst.Write(chunk); werr != nil {
			dst = io.Discard
		}
		if err != bufio.ErrBufferFull {
			return err
		}
		chunk, err = r.ReadSlice('\n')
	}
}

func (m *Mux) control(line string) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "!exit" {
		return
	}
	i, err1 := strconv.Atoi(f[1])
	code, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.exits[i] = code
	if ch := m.exited[i]; ch != nil {
		close(ch)
		delete(m.exited, i)
	}
	if w := m.outs[i]; w != nil {
		w.Close()
		delete(m.outs, i)
	}
}
