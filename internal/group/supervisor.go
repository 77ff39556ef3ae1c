package group

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"mcpbox/internal/procgroup"
)

// Member is one server of a group as the supervisor runs it.
type Member struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"` // K=V added to the supervisor's environment
	// Secrets are the names of environment variables of the supervisor
	// that this member gets; the others' are removed from its environment.
	Secrets []string `json:"secrets"`
}

// stopGrace is how long a member has to exit after its stdin closes.
const stopGrace = 2 * time.Second

// supervisor runs the members.
type supervisor struct {
	members    []Member
	allSecrets map[string]bool
	out        io.Writer
	outMu      sync.Mutex
	errOut     io.Writer

	mu      sync.Mutex
	running map[int]*child
	wg      sync.WaitGroup
}

type child struct {
	cmd   *exec.Cmd
	group *procgroup.Group // the member's process group, held by pidfd
	stdin *os.File
	done  chan struct{}
}

// memberWriteTimeout bounds a write to one member: a member that stops
// reading would stall every member's input, so it is stopped instead.
var memberWriteTimeout = 30 * time.Second

// Supervise runs the members as in reads commands, until in ends: then it
// stops every member and returns.
func Supervise(members []Member, in io.Reader, out, errOut io.Writer) error {
	s := &supervisor{members: members, out: out, errOut: errOut, running: map[int]*child{}, allSecrets: map[string]bool{}}
	for _, m := range members {
		for _, n := range m.Secrets {
			s.allSecrets[n] = true
		}
	}
	r := bufio.NewReaderSize(in, 64<<10)
	var err error
	for {
		var line []byte
		line, err = r.ReadSlice('\n')
		if len(line) > 0 && line[0] == '!' {
			s.control(string(bytes.TrimSpace(line)))
		} else if len(line) > 0 {
			err = s.forward(line, r, err)
		}
		if err != nil {
			break
		}
	}
	s.mu.Lock()
	for i := range s.running {
		go s.stop(i)
	}
	s.mu.Unlock()
	s.wg.Wait()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// forward copies one message line (which may be longer than the reader's
// buffer: err is ReadSlice's) to its member; a message for a member that
// is not running is dropped.
func (s *supervisor) forward(first []byte, r *bufio.Reader, err error) error {
	sp := bytes.IndexByte(first, ' ')
	i := -1
	if sp > 0 {
		if n, aerr := strconv.Atoi(string(first[:sp])); aerr == nil {
			i = n
		}
	}
	s.mu.Lock()
	c := s.running[i]
	s.mu.Unlock()
	var w io.Writer = io.Discard
	if c != nil {
		w = c.stdin
		if c.stdin.SetWriteDeadline(time.Now().Add(memberWriteTimeout)) == nil {
			defer c.stdin.SetWriteDeadline(time.Time{})
		}
	}
	chunk := first
	if sp > 0 {
		chunk = first[sp+1:]
	}
	for {
		if _, werr := w.Write(chunk); werr != nil {
			if errors.Is(werr, os.ErrDeadlineExceeded) {
				fmt.Fprintf(s.errOut, "group: %s stopped reading its input; stopping it\n", s.members[i].Name)
				go s.stop(i)
			}
			w = io.Discard // the member is gone; drain the line
		}
		if err != bufio.ErrBufferFull {
			return err
		}
		chunk, err = r.ReadSlice('\n')
	}
}

func (s *supervisor) control(line string) {
	f := strings.Fields(line)
	if len(f) != 2 {
		fmt.Fprintf(s.errOut, "group: bad control line %q\n", line)
		return
	}
	i, err := strconv.Atoi(f[1])
	if err != nil || i < 0 || i >= len(s.members) {
		fmt.Fprintf(s.errOut, "group: no member %q\n", f[1])
		return
	}
	switch f[0] {
	case "!start":
		if err := s.start(i); err != nil {
			fmt.Fprintf(s.errOut, "group: starting %s: %v\n", s.members[i].Name, err)
			s.send(fmt.Sprintf("!exit %d 127\n", i))
		}
	case "!stop":
		go s.stop(i)
	default:
		fmt.Fprintf(s.errOut, "group: unknown control %q\n", f[0])
	}
}

// env is the supervisor's environment without other members' secrets,
// plus m's own variables.
func (s *supervisor) env(m Member) []string {
	own := map[string]bool{}
	for _, n := range m.Secrets {
		own[n] = true
	}
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if s.allSecrets[k] && !own[k] {
			continue
		}
		out = append(out, kv)
	}
	return append(out, m.Env...)
}

func (s *supervisor) start(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[i] != nil {
		return nil
	}
	m := s.members[i]
	if len(m.Argv) == 0 {
		return errors.New("empty command")
	}
	cmd := exec.Command(m.Argv[0], m.Argv[1:]...)
	cmd.Env = s.env(m)
	cmd.Stderr = &prefixWriter{w: s.errOut, prefix: m.Name + ": "}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A pipe of our own (not StdinPipe) so that writes can take a deadline.
	inR, stdin, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdin = inR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		inR.Close()
		stdin.Close()
		return err
	}
	err = cmd.Start()
	inR.Close()
	if err != nil {
		stdin.Close()
		return err
	}
	// Held before anything can reap the member: stop's kill must reach
	// its group only, never one that took the number after the reap.
	g, err := procgroup.OpenStarted(cmd)
	if err != nil {
		stdin.Close()
		return err
	}
	c := &child{cmd: cmd, group: g, stdin: stdin, done: make(chan struct{})}
	s.running[i] = c
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.pump(i, stdout)
		err := cmd.Wait()
		_ = g.Close()
		close(c.done)
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if code < 0 {
				code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
			}
		}
		s.mu.Lock()
		if s.running[i] == c {
			delete(s.running, i)
		}
		s.mu.Unlock()
		s.send(fmt.Sprintf("!exit %d %d\n", i, code))
	}()
	return nil
}

// pump copies member i's stdout, one prefixed line at a time.
func (s *supervisor) pump(i int, stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	prefix := strconv.Itoa(i) + " "
	for {
		chunk, err := r.ReadSlice('\n')
		if len(chunk) == 0 && err != nil {
			return
		}
		s.outMu.Lock()
		_, werr := io.WriteString(s.out, prefix)
		for werr == nil {
			_, werr = s.out.Write(chunk)
			if err != bufio.ErrBufferFull {
				break
			}
			chunk, err = r.ReadSlice('\n')
		}
		if werr == nil && (err != nil && err != bufio.ErrBufferFull) {
			// A last line without newline still ends the frame.
			_, werr = io.WriteString(s.out, "\n")
		}
		s.outMu.Unlock()
		if werr != nil || err != nil {
			return
		}
	}
}

func (s *supervisor) send(line string) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	io.WriteString(s.out, line)
}

// stop closes member i's stdin, then kills its process group if it has
// not exited within stopGrace.
func (s *supervisor) stop(i int) {
	s.mu.Lock()
	c := s.running[i]
	s.mu.Unlock()
	if c == nil {
		return
	}
	c.stdin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	select {
	case <-c.done:
		return
	case <-ctx.Done():
	}
	_ = c.group.Kill()
	<-c.done
}

// prefixWriter prefixes each line with the member's name.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	mid    bool // inside a line
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		if !p.mid {
			io.WriteString(p.w, p.prefix)
			p.mid = true
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.w.Write(b)
			break
		}
		p.w.Write(b[:i+1])
		p.mid = false
		b = b[i+1:]
	}
	return n, nil
}
