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
	// Timeout bounds a cmd: provider; zero means DefaultCmdTimeout.
	Timeout time.Duration
	// AllowShort accepts values shorter than MinValue.
	AllowShort bool
	// LookupEnv reads mcpbox's environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
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
		v, err = fromFile(arg)
	case "cmd":
		v, err = fromCmd(ctx, arg, opts)
	default:
		return nil, fmt.Errorf("secret reference scheme %q: want env, file or cmd", scheme)
	}
	if err != nil {
		return nil, err
	}
	return Accept(v, scheme, opts)
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
		return nil, fmt.Errorf("secret from %s is empty", source)
	case len(v) > MaxValue:
		return nil, fmt.Errorf("secret from %s: larger than %d bytes", source, MaxValue)
	case len(v) < MinValue && !opts.AllowShort:
		return nil, fmt.Errorf("secret from %s is shorter than %d bytes: redaction by value would hit ordinary text", source, MinValue)
	}
	return v, nil
}

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

// fromFile reads PATH; a leading "~/" is the user's home directory, as
// the config reference's file:~/.config/tok example has it (no shell
// ever expands it here, in a config or in exec's --secret NAME=file:~/x).
func fromFile(path string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("secret from file %s: %w", path, err)
		}
		path = filepath.Join(home, rest)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("secret from file: %w", err)
	}
	defer f.Close()
	v, err := io.ReadAll(io.LimitReader(f, MaxValue+1))
	if err != nil {
		return nil, fmt.Errorf("secret from file %s: %w", path, err)
	}
	if len(v) > MaxValue {
		return nil, fmt.Errorf("secret from file %s: larger than %d bytes", path, MaxValue)
	}
	return v, nil
}

// fromCmd runs PROGRAM ARGS without a shell (words split on white space)
// and takes its standard output. Its standard error is not kept: it could
// echo the value.
func fromCmd(ctx context.Context, command string, opts Options) ([]byte, error) {
	argv := strings.Fields(command)
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultCmdTimeout
	}
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
