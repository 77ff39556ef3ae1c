package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// store is the on-disk layout under Options.Store. One pull at a time
// holds its lock (a flock on Store/lock, across processes), so the temp
// files it finds at the start are leftovers of a pull that died.
type store struct {
	dir  string
	lock *os.File
}

func openStore(ctx context.Context, dir string) (*store, error) {
	for _, d := range []string{dir, dir + "/blobs/sha256", dir + "/rootfs", dir + "/tmp"} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating image store %s: %w", d, err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening image store lock: %w", err)
	}
	// flock cannot be cancelled: poll, so a cancelled pull stops waiting.
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking image store %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another pull into %s: %w", dir, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	s := &store{dir: dir, lock: f}
	if err := s.cleanTmp(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *store) close() { s.lock.Close() }

// cleanTmp removes what a pull that died left in Store/tmp.
func (s *store) cleanTmp() error {
	ents, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return fmt.Errorf("reading image store temp dir: %w", err)
	}
	for _, e := range ents {
		if err := removeTree(filepath.Join(s.tmpDir(), e.Name())); err != nil {
			return fmt.Errorf("removing leftover %s: %w", e.Name(), err)
		}
	}
	return nil
}

// removeTree removes p like os.RemoveAll, first giving its directories
// back the owner's write permission an image may have taken away.
func removeTree(p string) error {
	_ = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

func (s *store) tmpDir() string { return filepath.Join(s.dir, "tmp") }

func (s *store) blobPath(digest string) string {
	return filepath.Join(s.dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

func (s *store) rootPath(digest string) string {
	return filepath.Join(s.dir, "rootfs", strings.TrimPrefix(digest, "sha256:"))
}

func (s *store) hasBlob(digest string) bool {
	fi, err := os.Lstat(s.blobPath(digest))
	return err == nil && fi.Mode().IsRegular()
}

// putBlob streams r into the store as the blob digest of size bytes
// (size < 0: unknown, bounded by max): into a temp file, hashed on the
// way, renamed into place only when digest and size match.
func (s *store) putBlob(r io.Reader, digest string, size, max int64) error {
	if err := checkDigest(digest); err != nil {
		return err
	}
	if size > max {
		return fmt.Errorf("blob %s: %d bytes, over the limit of %d: %w", digest, size, max, ErrLimit)
	}
	f, err := os.CreateTemp(s.tmpDir(), "blob-")
	if err != nil {
		return fmt.Errorf("creating temp blob: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	h := sha256.New()
	limit := max
	if size >= 0 {
		limit = size
	}
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, limit+1))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fetching blob %s: %w", digest, err)
	}
	if n > limit {
		if size >= 0 {
			return fmt.Errorf("blob %s: longer than its %d bytes: %w", digest, size, ErrDigest)
		}
		return fmt.Errorf("blob %s: over the limit of %d bytes: %w", digest, max, ErrLimit)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("blob %s: %d bytes, want %d: %w", digest, n, size, ErrDigest)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return fmt.Errorf("blob %s: content hashes to %s: %w", digest, got, ErrDigest)
	}
	if err := os.Rename(tmp, s.blobPath(digest)); err != nil {
		return fmt.Errorf("storing blob %s: %w", digest, err)
	}
	return nil
}

// readBlob returns the stored blob digest whole, checked against its
// digest (a store someone tampered with fails here), at most max bytes.
func (s *store) readBlob(digest string, max int64) ([]byte, error) {
	f, err := s.openBlob(digest)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", digest, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("blob %s: over the limit of %d bytes: %w", digest, max, ErrLimit)
	}
	if err := f.verify(); err != nil {
		return nil, err
	}
	return b, nil
}

// openBlob opens a stored blob for reading; the caller reads it to the
// end and calls verify, which checks what was read against digest.
func (s *store) openBlob(digest string) (*verifiedBlob, error) {
	if err := checkDigest(digest); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.blobPath(digest), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("opening blob %s: %w", digest, err)
	}
	return &verifiedBlob{f: f, h: sha256.New(), digest: digest}, nil
}

// verifiedBlob hashes what is read from a blob file.
type verifiedBlob struct {
	f      *os.File
	h      hash.Hash
	digest string
}

func (b *verifiedBlob) Read(p []byte) (int, error) {
	n, err := b.f.Read(p)
	b.h.Write(p[:n])
	return n, err
}

// verify drains the rest of the file and compares the hash.
func (b *verifiedBlob) verify() error {
	if _, err := io.Copy(b.h, b.f); err != nil {
		return fmt.Errorf("reading blob %s: %w", b.digest, err)
	}
	if got := "sha256:" + hex.EncodeToString(b.h.Sum(nil)); got != b.digest {
		return fmt.Errorf("stored blob %s hashes to %s: %w", b.digest, got, ErrDigest)
	}
	return nil
}

func (b *verifiedBlob) Close() error { return b.f.Close() }

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// checkDigest accepts only "sha256:" and 64 lower-case hex digits: a
// digest becomes a file name in the store.
func checkDigest(d string) error {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return fmt.Errorf("digest %q: want sha256 and 64 hex digits: %w", d, ErrHostile)
	}
	return nil
}
