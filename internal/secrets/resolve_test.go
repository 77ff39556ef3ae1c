package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ref splits a reference the way config.ParseSecretRef does for a valid
// one; an invalid one gives a Ref that Resolve refuses.
func ref(s string) Ref {
	scheme, arg, _ := strings.Cut(s, ":")
	return Ref{Scheme: scheme, Arg: arg}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("file-secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxValue+1), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", dir)
	env := map[string]string{"GH_TOKEN": "env-secret-value", "SHORT": "abc"}
	opts := Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	tests := []struct {
		ref, want, wantErr string
	}{
		{ref: "env:GH_TOKEN", want: "env-secret-value"},
		{ref: "file:" + file, want: "file-secret-value"},
		{ref: "file:~/token", want: "file-secret-value"}, // the home directory, as config.md's example
		{ref: "file:~/nope", wantErr: filepath.Join(dir, "nope") + ": no such file"},
		{ref: "cmd:printf %s cmd-secret-value", want: "cmd-secret-value"},
		{ref: "env:MISSING", wantErr: "not set"},
		{ref: "env:SHORT", wantErr: "shorter than 8"},
		{ref: "file:" + filepath.Join(dir, "nope"), wantErr: "no such file"},
		{ref: "file:" + big, wantErr: "larger than"},
		{ref: "cmd:false", wantErr: "exit status 1"},
		{ref: "cmd:no-such-program-here", wantErr: "executable file not found"},
		{ref: "literal-token-value", wantErr: "must be env:VAR"},
		{ref: "vault:x", wantErr: "scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			v, err := Resolve(context.Background(), ref(tt.ref), opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve(%q) = %q, %v; want an error with %q", tt.ref, v, err, tt.wantErr)
				}
				return
			}
			if err != nil || string(v) != tt.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tt.ref, v, err, tt.want)
			}
		})
	}
}

func TestResolveCmdTimeout(t *testing.T) {
	start := time.Now()
	_, err := Resolve(context.Background(), ref("cmd:sleep 30"), Options{Timeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %s", d)
	}
}

// Cancelling the caller's context stops a slow cmd: provider at once, not
// at its own timeout.
func TestResolveCmdCancel(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(errors.New("shutting down")) })
	start := time.Now()
	_, err := Resolve(ctx, ref("cmd:sleep 30"), Options{Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("err = %v, want the cancellation's cause", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("a cancelled cmd: secret took %s to give up", d)
	}
}

// Errors name the reference, never the value.
func TestErrorsCarryNoValue(t *testing.T) {
	_, err := Resolve(context.Background(), ref("cmd:printf %s tiny42"), Options{})
	if err == nil || strings.Contains(err.Error(), "tiny42") {
		t.Fatalf("err = %v: want a refusal that does not repeat the value", err)
	}
}

// TestAccept: a value from a source of a backend's own meets the limits
// Resolve applies: trimmed, not empty, not too short or too long; its
// errors name the source, never the value.
func TestAccept(t *testing.T) {
	long := bytes.Repeat([]byte("x"), MaxValue+1)
	tests := []struct {
		in      []byte
		want    string
		wantErr string
	}{
		{[]byte("  token-0123456789\n"), "token-0123456789", ""},
		{[]byte(" \n\t"), "", "secret from kubernetes:s/k is empty"},
		{[]byte("short12"), "", "shorter than 8 bytes"},
		{long, "", "larger than"},
	}
	for _, tc := range tests {
		got, err := Accept(tc.in, "kubernetes:s/k", Options{})
		switch {
		case tc.wantErr == "" && (err != nil || string(got) != tc.want):
			t.Errorf("Accept(%.20q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("Accept(%.20q) error %v, want %q", tc.in, err, tc.wantErr)
		case err != nil && strings.Contains(err.Error(), "short12"):
			t.Errorf("the error repeats the value: %v", err)
		}
	}
	if got, err := Accept([]byte("short"), "x", Options{AllowShort: true}); err != nil || string(got) != "short" {
		t.Errorf("AllowShort: %q, %v", got, err)
	}
}

// A file: reference to a named pipe reads what its writer writes (a
// password manager's one-time pipe), and one that no program writes is
// given up on within the timeout, or at once when ctx ends, instead of
// hanging the start in open(2) for good.
func TestResolveNamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const value = "pipe-secret-value-1234"
	wrote := make(chan error, 1)
	go func() {
		// Blocks until Resolve opens the read end.
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(value + "\n")
			f.Close()
		}
		wrote <- err
	}()
	v, err := Resolve(context.Background(), ref("file:"+fifo), Options{Timeout: 10 * time.Second})
	if err != nil || string(v) != value {
		t.Fatalf("Resolve(pipe with a writer) = %q, %v; want %q", v, err, value)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	_, err = Resolve(context.Background(), ref("file:"+fifo), Options{Timeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no program wrote it to its end within 200ms") {
		t.Fatalf("Resolve(pipe with no writer) err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("giving up on a pipe took %s", d)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(100*time.Millisecond, func() { cancel(errors.New("shutting down")) })
	_, err = Resolve(ctx, ref("file:"+fifo), Options{Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("Resolve(pipe, cancelled) err = %v, want the cancellation's cause", err)
	}
	// No reader is left blocked on the pipe: a writer finds none.
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
		t.Fatal("a reader of the pipe is still open after Resolve gave up")
	}
}

// awaitWriter returns at once when the writer wrote and left before it
// was called: the poller reports only readiness that comes after a wait
// begins, and a writer woken by the reader's open can be that fast.
func TestAwaitWriterAfterTheWriter(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.WriteFile(fifo, []byte("written-before-the-wait"), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := awaitWriter(r); err != nil {
		t.Fatalf("awaitWriter after the writer wrote and left: %v", err)
	}
}

// Check looks a named pipe up without opening it, so that nothing
// blocks and no value is used up; other references it resolves.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("a-long-enough-value"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Check(context.Background(), ref("file:"+fifo), Options{Timeout: time.Minute}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Check(pipe) = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the open the test just caught, then fail.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("Check opened a named pipe")
	}
	for _, tt := range []struct {
		ref  string
		fail bool
	}{
		{"file:" + good, false},
		{"file:" + short, true},
		{"file:" + filepath.Join(dir, "missing"), true},
		{"file:" + dir, true},
	} {
		if err := Check(context.Background(), ref(tt.ref), Options{}); (err != nil) != tt.fail {
			t.Errorf("Check(%s) = %v, want failure %v", tt.ref, err, tt.fail)
		}
	}
}

// A writer that writes part of a value and keeps the pipe open does not
// hold the start past a cancellation, and a terminal (which may never
// be written) is read within the timeout.
func TestResolveWaitsBounded(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		f.WriteString("a-long-secret-")
		<-release
	}()
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(errors.New("shutting down")) })
	start := time.Now()
	_, err := Resolve(ctx, ref("file:"+fifo), Options{Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Resolve(a pipe written in part, cancelled) err = %v, want the cancellation's cause", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a cancelled read of a pipe took %s", d)
	}

	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("the pseudo-terminal's number: %v", err)
	}
	start = time.Now()
	_, err = Resolve(context.Background(), ref(fmt.Sprintf("file:/dev/pts/%d", n)), Options{Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "within 300ms") {
		t.Errorf("Resolve(a terminal nobody types into) err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("reading a terminal took %s", d)
	}
	if err := Check(context.Background(), ref(fmt.Sprintf("file:/dev/pts/%d", n)), Options{}); err != nil {
		t.Errorf("Check(a terminal) = %v, want it looked up only", err)
	}
}
