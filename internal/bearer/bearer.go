package bearer

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// A File is one of the secret files kept in a state dir.
type File string

const (
	// Token guards the gateway's HTTP endpoint when the config names no
	// clients; client configs hold it.
	Token File = "token"
	// Dashboard signs `mcpbox ui`'s one-time login URLs and, typed into
	// the login form, logs in as admin. It is apart from Token because
	// client configs hold Token: an agent that can read its client's
	// config must not be able to approve its own calls.
	Dashboard File = "dashboard-secret"
)

// Prefix starts every token New makes.
const Prefix = "mcpbox_"

// MinLen is the shortest token a file may hold (the gateway refuses
// shorter ones).
const MinLen = 16

// maxFile bounds what is read of a token file.
const maxFile = 4096

// New returns a fresh token: Prefix and 26 random base32 characters
// (130 bits).
func New() string { return Prefix + strings.ToLower(rand.Text()) }

// Path is the file f of state dir dir.
func (f File) Path(dir string) string { return filepath.Join(dir, string(f)) }

// Load returns the token kept in f in dir, making one when there is none.
// Preconditions: dir is the caller's and writable by no one else.
func (f File) Load(dir string) (string, error) {
	tok, err := f.Read(dir)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	tok = New()
	err = f.place(dir, tok, false)
	if errors.Is(err, fs.ErrExist) {
		// Another instance on this state dir made it first.
		return f.Read(dir)
	}
	if err != nil {
		return "", err
	}
	return tok, nil
}

// Rotate replaces the token kept in f in dir with a new one and returns
// it. The file is replaced in one step: a reader sees the old token or
// the new one.
func (f File) Rotate(dir string) (string, error) {
	tok := New()
	if err := f.place(dir, tok, true); err != nil {
		return "", err
	}
	return tok, nil
}

// Read returns the token kept in f in dir; an error wrapping
// fs.ErrNotExist when there is none.
func (f File) Read(dir string) (string, error) {
	tok, _, err := read(f, f.Path(dir))
	return tok, err
}

// noun names f in errors.
func (f File) noun() string {
	if f == Dashboard {
		return "dashboard secret file"
	}
	return "token file"
}

// fileID tells one version of the token file from another.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// idOf is fi's fileID (fileid_*.go: the stat fields differ by system).
func idOf(fi fs.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return statID(st)
}

// read opens path without following a symlink and without blocking on a
// FIFO, checks what it is, and parses the token.
func read(file File, path string) (string, fileID, error) {
	what := file.noun()
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ELOOP) {
		return "", fileID{}, fmt.Errorf("reading %s %s: %w: it is a symlink", what, path, ErrUnsafeFile)
	}
	if err != nil {
		return "", fileID{}, fmt.Errorf("reading %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fileID{}, fmt.Errorf("reading %s: %w", what, err)
	}
	if err := check(file, path, fi); err != nil {
		return "", fileID{}, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return "", fileID{}, fmt.Errorf("reading %s: %w", what, err)
	}
	tok, err := parse(b)
	if err != nil {
		return "", fileID{}, fmt.Errorf("reading %s %s: %w", what, path, err)
	}
	return tok, idOf(fi), nil
}

// check refuses a secret file that is not a regular file of this user
// with no permission for group or others: someone else could have read
// or chosen the token.
func check(file File, path string, fi fs.FileInfo) error {
	what := file.noun()
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("reading %s %s: %w: not a regular file (%v)", what, path, ErrUnsafeFile, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		fix := "mcpbox token rotate"
		if file == Dashboard {
			fix = "delete it: mcpbox ui makes a new one"
		}
		return fmt.Errorf("reading %s %s: %w: mode %v, want 0600 (chmod 600 it, or %s)", what, path, ErrUnsafeFile, perm, fix)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("reading %s %s: %w: it belongs to uid %d, not to this user (%d)", what, path, ErrUnsafeFile, st.Uid, os.Geteuid())
	}
	return nil
}

// parse takes the token from a file's content: one line of RFC 6750
// token characters, at least MinLen long.
func parse(b []byte) (string, error) {
	if len(b) > maxFile {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadToken, maxFile)
	}
	tok := strings.TrimRight(string(b), "\r\n")
	if len(tok) < MinLen {
		return "", fmt.Errorf("%w: shorter than %d characters", ErrBadToken, MinLen)
	}
	body := strings.TrimRight(tok, "=")
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return "", fmt.Errorf("%w: character %d is not a token character", ErrBadToken, i+1)
		}
	}
	return tok, nil
}

// place writes tok to a new temporary file in dir (O_EXCL|O_NOFOLLOW,
// mode 0600) and moves it to f: linked (failing with fs.ErrExist when
// there is one) or, with replace, renamed over it.
func (f File) place(dir, tok string, replace bool) error {
	path := f.Path(dir)
	tmp := filepath.Join(dir, "."+string(f)+"-"+strings.ToLower(rand.Text()))
	fd, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("creating %s in %s: %w", f, dir, err)
	}
	defer os.Remove(tmp)
	// The umask may take bits away; the owner must keep read and write.
	err = fd.Chmod(0o600)
	if err == nil {
		_, err = fd.WriteString(tok + "\n")
	}
	if err == nil {
		err = fd.Sync()
	}
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if replace {
		err = os.Rename(tmp, path)
	} else {
		err = os.Link(tmp, path)
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating %s: %w", path, fs.ErrExist)
		}
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // the new name survives a crash
		d.Close()
	}
	return nil
}

// Watch follows a secret file of a state dir, so that a running gateway
// accepts a rotated token and refuses the old one.
type Watch struct {
	file File
	path string

	mu    sync.Mutex
	id    fileID // guarded by mu
	token string // guarded by mu
}

// Watch loads f's token in dir (making one when there is none, see Load)
// and follows the file.
func (f File) Watch(dir string) (*Watch, error) {
	if _, err := f.Load(dir); err != nil {
		return nil, err
	}
	w := &Watch{file: f, path: f.Path(dir)}
	tok, id, err := read(f, w.path)
	if err != nil {
		return nil, err
	}
	w.id, w.token = id, tok
	return w, nil
}

// Token returns the token last read.
func (w *Watch) Token() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.token
}

// Refresh re-reads the file when it is no longer the one last read
// (another inode, size, modification or change time) and returns the
// token and whether it changed. On an error (the file gone, or no longer
// safe) the last token stays: only a new, valid file replaces it.
func (w *Watch) Refresh() (string, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fi, err := os.Lstat(w.path)
	if err != nil {
		return w.token, false, fmt.Errorf("checking %s: %w", w.path, err)
	}
	if idOf(fi) == w.id {
		return w.token, false, nil
	}
	tok, id, err := read(w.file, w.path)
	if err != nil {
		return w.token, false, err
	}
	changed := tok != w.token
	w.id, w.token = id, tok
	return tok, changed, nil
}
