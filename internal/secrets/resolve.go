package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Limits of a resolution: secrets are tokens and keys, not files.
const (
	// MaxValue is the largest value accepted, in bytes.
	MaxValue = 64 << 10
	// MinValue is the shortest value accepted: shorter ones would make
	// redaction by value hit ordinary text.
	MinValue = 8
	// DefaultCmdTimeout bounds a cmd: provider when Options.Timeout is zero.
	DefaultCmdTimeout = 10 * time.Second
)

// Options tunes Resolve. The zero value is the default.
type Options struct {
	// Timeout bounds a cmd: provider, and the read of a file: reference
	// that is not a regular file (a named pipe, a terminal); zero means
	// DefaultCmdTimeout.
	Timeout time.Duration
	// AllowShort accepts values shorter than MinValue.
	AllowShort bool
	// LookupEnv reads mcpbox's environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// timeout is Timeout, or DefaultCmdTimeout when that is zero.
func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultCmdTimeout
	}
	return o.Timeout
}

// Ref is where a secret comes from, as config.ParseSecretRef parses the
// text form (env:VAR, file:PATH, cmd:COMMAND): the one parser of that
// syntax is there, with the config's checks; this package only resolves.
type Ref struct {
	Scheme string // "env", "file" or "cmd"
	Arg    string // variable name, path or command
}

// Resolve returns the value ref points to, with surrounding white space
// (a trailing newline from a file or a command) trimmed. Cancelling ctx
// stops a cmd: provider.
func Resolve(ctx context.Context, ref Ref, opts Options) ([]byte, error) {
	scheme, arg := ref.Scheme, ref.Arg
	if strings.TrimSpace(arg) == "" {
		return nil, errors.New("secret reference must be env:VAR, file:PATH or cmd:COMMAND")
	}
	var v []byte
	var err error
	switch scheme {
	case "env":
		v, err = fromEnv(arg, opts)
	case "file":
		v, err = fromFile(ctx, arg, opts)
	case "cmd":
		v, err = fromCmd(ctx, arg, opts)
	default:
		return nil, fmt.Errorf("secret reference scheme %q: want env, file or cmd", scheme)
	}
	if err != nil {
		return nil, err
	}
	source := scheme + ":" + arg // the variable or file to fix
	if scheme == "cmd" {
		source = scheme // a command line may hold anything
	}
	return Accept(v, source, opts)
}

// Accept applies to a value read from source (a scheme, or a reference
// that names no value) what every secret meets: surrounding white space
// trimmed, not empty, at most MaxValue bytes and, unless
// opts.AllowShort, at least MinValue. Resolve calls it; so does a
// backend that reads a source of its own (a Kubernetes Secret).
func Accept(v []byte, source string, opts Options) ([]byte, error) {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0:
		return nil, &ValueError{fmt.Sprintf("secret from %s is empty", source)}
	case len(v) > MaxValue:
		return nil, &ValueError{fmt.Sprintf("secret from %s: larger than %d bytes", source, MaxValue)}
	case len(v) < MinValue && !opts.AllowShort:
		return nil, &ValueError{fmt.Sprintf("secret from %s is shorter than %d bytes: redaction by value would hit ordinary text", source, MinValue)}
	}
	return v, nil
}

// ValueError is Accept's error: a value that was read and cannot be used
// (empty, too large, too short), as against one that cannot be read.
type ValueError struct{ msg string }

func (e *ValueError) Error() string { return e.msg }

func fromEnv(name string, opts Options) ([]byte, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("secret from env:%s: the variable is not set", name)
	}
	return []byte(v), nil
}

// Check says whether Resolve would succeed now, without taking a value
// that reading would use up or wait for: a file: reference to a named
// pipe (one that a password manager writes a value into when it is
// opened) or a device is only looked up and checked for read permission,
// neither opened nor read. Start-up warnings call it, so that checking
// cannot wait on a program or take the value the server's start needs.
func Check(ctx context.Context, ref Ref, opts Options) error {
	if ref.Scheme == "file" {
		path, err := expandHome(ref.Arg)
		if err != nil {
			return err
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) != 0 {
			if err := unix.Access(path, unix.R_OK); err != nil {
				return fmt.Errorf("secret from file %s: %w", path, err)
			}
			return nil
		}
	}
	_, err := Resolve(ctx, ref, opts)
	return err
}

// expandHome replaces a leading "~/" with the user's home directory, as
// the config reference's file:~/.config/tok example has it (no shell
// ever expands it here, in a config or in exec's --secret NAME=file:~/x).
func expandHome(path string) (string, error) {
	rest, ok := strings.CutPrefix(path, "~/")
	if !ok {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("secret from file %s: %w", path, err)
	}
	return filepath.Join(home, rest), nil
}

// fromFile reads PATH (see expandHome). What is not a regular file (a
// named pipe, a terminal) is read within opts.Timeout and until ctx ends:
// its reads wait on another program, which might never write.
func fromFile(ctx context.Context, path string, opts Options) ([]byte, error) {
	path, err := expandHome(path)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: an open of a pipe with no writer would block; for a
	// regular file it changes nothing. A pollable file so opened is read
	// through Go's poller, which keeps its read deadline.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("secret from file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("secret from file: %w", err)
	}
	timeout := opts.timeout()
	if !fi.Mode().IsRegular() {
		// A file that is not pollable (/dev/null) does not wait: ErrNoDeadline.
		if f.SetReadDeadline(time.Now().Add(timeout)) == nil {
			stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
			defer stop()
		}
		if fi.Mode()&os.ModeNamedPipe != 0 {
			err = awaitWriter(f)
		}
	}
	var v []byte
	if err == nil {
		v, err = io.ReadAll(io.LimitReader(f, MaxValue+1))
	}
	switch {
	case err == nil && len(v) > MaxValue:
		return nil, fmt.Errorf("secret from file %s: larger than %d bytes", path, MaxValue)
	case err == nil:
		return v, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("secret from file %s: %w", path, context.Cause(ctx))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, fmt.Errorf("secret from file %s: no program wrote it to its end within %s", path, timeout)
	}
	return nil, fmt.Errorf("secret from file: %w", err)
}

// awaitWriter waits, within f's read deadline, until the pipe f (open
// for reading without blocking) has something to read or its writer has
// come and gone. Reading at once would find no writer yet and take that
// for the end of the value: a password manager opens its end only when
// it sees a reader.
func awaitWriter(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Read(func(fd uintptr) bool {
		// Ask the pipe itself: what came before this call (the writer
		// may have written and gone already) is no longer a readiness
		// the poller waits for, only what comes after. POLLHUP comes
		// only once a writer has been and gone.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return n > 0 || err != nil && err != unix.EINTR
	})
}

// fromCmd runs PROGRAM ARGS without a shell (words split on white space)
// and takes its standard output. Its standard error is not kept: it could
// echo the value.
func fromCmd(ctx context.Context, command string, opts Options) ([]byte, error) {
	argv := strings.Fields(command)
	timeout := opts.timeout()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = time.Second
	var out limitedBuffer
	cmd.Stdout = &out
	err := cmd.Run()
	switch {
	case parent.Err() != nil:
		// The caller gave up (a cancelled start, a shutdown).
		return nil, fmt.Errorf("secret from cmd:%s: %w", argv[0], context.Cause(parent))
	case ctx.Err() != nil:
		return nil, fmt.Errorf("secret from cmd:%s: no answer within %s", argv[0], timeout)
	case err != nil:
		return nil, fmt.Errorf("secret from cmd:%s: %w", argv[0], err)
	case out.over:
		return nil, fmt.Errorf("secret from cmd:%s: output larger than %d bytes", argv[0], MaxValue)
	}
	return out.buf.Bytes(), nil
}

// limitedBuffer keeps at most MaxValue bytes and notes whether more came.
type limitedBuffer struct {
	buf  bytes.Buffer
	over bool
}

// Write keeps what fits and claims the rest, so the command is not cut
// off mid-write by a short-write error.
func (b *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := MaxValue - b.buf.Len(); n > room {
		b.over = true
		p = p[:max(room, 0)]
	}
	b.buf.Write(p)
	return n, nil
}
