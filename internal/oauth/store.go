package oauth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Grant is what a login leaves behind for one server: the tokens, and
// what they are bound to and how to refresh and revoke them.
type Grant struct {
	// Server is the MCP server URL the grant was obtained for, the key it
	// is stored under.
	Server string `json:"server"`
	// Issuer, Resource and ClientID bind the grant: the tokens came from
	// Issuer, for Resource (Server or a prefix of it), issued to
	// ClientID. The transport sends the access token to Server only.
	Issuer   string `json:"issuer"`
	Resource string `json:"resource"`
	ClientID string `json:"client_id"`
	// ClientSecret and AuthMethod authenticate the client at the token
	// endpoint (a dynamically registered confidential client).
	ClientSecret string `json:"client_secret,omitempty"`
	AuthMethod   string `json:"auth_method,omitempty"`
	// RedirectURI is the loopback redirect of the login: a silent login
	// at the same authorization server uses it (its port) again with
	// the client registered for it.
	RedirectURI string `json:"redirect_uri,omitempty"`
	// TokenEndpoint and RevocationEndpoint are the server's, from its
	// metadata at login.
	TokenEndpoint      string `json:"token_endpoint"`
	RevocationEndpoint string `json:"revocation_endpoint,omitempty"`

	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Issued is when the access token was obtained: with Expiry, its
	// lifetime, which bounds how early it is refreshed.
	Issued time.Time `json:"issued,omitzero"`
	// Scope is the granted (or, if the server did not say, requested)
	// space-separated scope.
	Scope string `json:"scope,omitempty"`
}

// GoString keeps a %#v of a grant from printing its secrets.
func (g *Grant) GoString() string {
	return fmt.Sprintf("oauth.Grant{Server:%q, Issuer:%q, Resource:%q, ClientID:%q}", g.Server, g.Issuer, g.Resource, g.ClientID)
}

// Secrets returns the grant's secret values (tokens, client secret), for
// a redactor to learn; empty ones are left out.
func (g *Grant) Secrets() []string {
	var out []string
	for _, v := range []string{g.AccessToken, g.RefreshToken, g.ClientSecret} {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// String keeps a %v of a grant from printing its secrets.
func (g *Grant) String() string { return g.GoString() }

// Store keeps grants, one per server URL (Grant.Server). Implementations
// must keep them secret (the file store encrypts them) and must return
// ErrNoToken for a server with no grant.
type Store interface {
	Load(ctx context.Context, server string) (*Grant, error)
	Save(ctx context.Context, g *Grant) error
	Delete(ctx context.Context, server string) error
}

// Locker is a Store that can keep every other refresher of a server's
// grant waiting, in this process and in others: a rotating refresh
// token is good for one refresh, and at many servers a second use of it
// revokes the whole grant. Transport refreshes under the lock, after
// loading the grant again (another holder may have refreshed it).
type Locker interface {
	// LockGrant waits (within ctx) until it holds server's grant, and
	// returns the function that lets go of it.
	LockGrant(ctx context.Context, server string) (unlock func(), err error)
}

// lockWait bounds how long LockGrant waits for another refresher: a
// refresh is one request, bounded by the HTTP client's timeout.
const lockWait = time.Minute

// KeySource supplies the 32-byte AES-256 key that a FileStore seals
// grants with.
type KeySource interface {
	Key(ctx context.Context) ([]byte, error)
}

// KeyFunc adapts a function (a cmd: secret provider, a keyring helper) to
// KeySource. The value it returns must hold at least 32 bytes of entropy:
// 32 raw bytes, their base64 or hex, or a longer random string, of which
// the key is the SHA-256 (no password stretching happens here).
type KeyFunc func(ctx context.Context) ([]byte, error)

// Key implements KeySource.
func (f KeyFunc) Key(ctx context.Context) ([]byte, error) {
	v, err := f(ctx)
	if err != nil {
		return nil, fmt.Errorf("getting the token store key: %w", err)
	}
	return keyFromValue(v)
}

// keyFromValue turns a provider's value into an AES-256 key.
func keyFromValue(v []byte) ([]byte, error) {
	s := strings.TrimSpace(string(v))
	if len(s) == 32 && len(v) == 32 {
		return v, nil
	}
	for _, dec := range []func(string) ([]byte, error){
		base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString, hex.DecodeString,
	} {
		if k, err := dec(s); err == nil && len(k) == 32 {
			return k, nil
		}
	}
	if len(s) < 32 {
		return nil, errors.New("token store key is too short: want 32 random bytes (base64 or hex) or a random string of at least 32 characters")
	}
	k := sha256.Sum256([]byte("mcpbox oauth store key\x00" + s))
	return k[:], nil
}

// KeyFile is a KeySource backed by a file of its own: 32 random bytes,
// base64, mode 0600, created on first use. A file that is not regular,
// not the user's, or open to group or others is refused.
type KeyFile string

// Key implements KeySource.
func (p KeyFile) Key(ctx context.Context) ([]byte, error) {
	path := string(p)
	b, err := readPrivate(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("creating token store key: %w", err)
		}
		k := make([]byte, 32)
		rand.Read(k)
		if err := writePrivate(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), false); err != nil {
			if !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("creating token store key: %w", err)
			}
			// Another process made it first: use theirs.
		} else {
			return k, nil
		}
		b, err = readPrivate(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading token store key: %w", err)
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) != 32 {
		return nil, fmt.Errorf("reading token store key %s: not 32 bytes of base64", path)
	}
	return k, nil
}

// FileStore keeps each grant in its own file in Dir, mode 0600, sealed
// with AES-256-GCM. The binding (server, issuer, resource, client id) is stored
// in the clear beside the sealed grant and is the cipher's additional
// data, so a record cannot be moved to another binding without failing
// to open, and Bindings can list logins without the key.
type FileStore struct {
	// Dir holds the grant files; created 0700 if missing.
	Dir string
	// Keys supplies the sealing key.
	Keys KeySource

	mu sync.Mutex // serializes writers of this process
}

// Binding is the clear part of a stored grant.
type Binding struct {
	Server   string `json:"server"`
	Issuer   string `json:"issuer"`
	Resource string `json:"resource"`
	ClientID string `json:"client_id"`
}

type sealedRecord struct {
	Version int `json:"v"`
	Binding
	Status
	Nonce  []byte `json:"nonce"`
	Sealed []byte `json:"sealed"`
}

// Status is what a listing shows of a stored grant besides its binding,
// kept in the clear next to it: no secret, and for display only (Load
// takes the sealed values; editing these changes nothing but a listing).
type Status struct {
	Expiry      time.Time `json:"expiry,omitzero"`       // of the access token; zero: not said
	Refreshable bool      `json:"refreshable,omitempty"` // a refresh token is held
	Scope       string    `json:"scope,omitempty"`
}

// StoredLogin is a grant as a listing sees it: no token.
type StoredLogin struct {
	Binding
	Status
}

const recordExt = ".grant"

func (s *FileStore) path(server string) string {
	sum := sha256.Sum256([]byte(server))
	return filepath.Join(s.Dir, hex.EncodeToString(sum[:16])+recordExt)
}

// CheckKey reports whether the store's key can be had and is usable, so
// that a login fails before its authorization rather than after it.
func (s *FileStore) CheckKey(ctx context.Context) error {
	_, err := s.aead(ctx)
	return err
}

func (s *FileStore) aead(ctx context.Context) (cipher.AEAD, error) {
	if s.Keys == nil {
		return nil, errors.New("token store has no key source")
	}
	k, err := s.Keys.Key(ctx)
	if err != nil {
		return nil, err
	}
	if len(k) != 32 {
		return nil, fmt.Errorf("token store key has %d bytes, want 32", len(k))
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func (b Binding) aad() []byte {
	j, _ := json.Marshal(b)
	return append([]byte("mcpbox-oauth-grant-v1\x00"), j...)
}

// Save seals g into its server's file, replacing an older one.
func (s *FileStore) Save(ctx context.Context, g *Grant) error {
	if g.Server == "" || g.Resource == "" || g.Issuer == "" || g.ClientID == "" {
		return errors.New("saving grant: server, issuer, resource and client id are required")
	}
	a, err := s.aead(ctx)
	if err != nil {
		return fmt.Errorf("saving grant for %s: %w", g.Resource, err)
	}
	plain, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("saving grant for %s: %w", g.Resource, err)
	}
	rec := sealedRecord{Version: 1, Binding: Binding{g.Server, g.Issuer, g.Resource, g.ClientID},
		Status: Status{Expiry: g.Expiry, Refreshable: g.RefreshToken != "", Scope: g.Scope}}
	rec.Nonce = make([]byte, a.NonceSize())
	rand.Read(rec.Nonce)
	rec.Sealed = a.Seal(nil, rec.Nonce, plain, rec.Binding.aad())
	clear(plain)
	out, _ := json.Marshal(rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("saving grant for %s: %w", g.Resource, err)
	}
	if err := writePrivate(s.path(g.Server), out, true); err != nil {
		return fmt.Errorf("saving grant for %s: %w", g.Resource, err)
	}
	return nil
}

// LockGrant implements Locker with an flock on a file beside the grant's
// (PATH.lock, kept): processes on one state dir, and each connection's
// own open file in one process, exclude each other.
func (s *FileStore) LockGrant(ctx context.Context, server string) (func(), error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("locking grant for %s: %w", server, err)
	}
	path := s.path(server) + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking grant for %s: %w", server, err)
	}
	// As the grants: a file of this user's, not one another user made
	// to hold the lock and so stop every refresh.
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		f.Close()
		return nil, fmt.Errorf("locking grant for %s: %s is not a regular file of this user", server, path)
	}
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing lets go
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking grant for %s: %w", server, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("locking grant for %s: another refresh held it: %w", server, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Load opens the grant of server; ErrNoToken if there is none,
// ErrTokenCorrupt if it does not open or names another binding.
func (s *FileStore) Load(ctx context.Context, server string) (*Grant, error) {
	p := s.path(server)
	b, err := readPrivate(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("loading grant for %s: %w", server, ErrNoToken)
	}
	if err != nil {
		return nil, fmt.Errorf("loading grant for %s: %w", server, err)
	}
	var rec sealedRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Version != 1 {
		return nil, fmt.Errorf("loading grant for %s from %s: %w", server, p, ErrTokenCorrupt)
	}
	if rec.Server != server {
		return nil, fmt.Errorf("loading grant for %s from %s: %w", server, p, ErrTokenCorrupt)
	}
	a, err := s.aead(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading grant for %s: %w", server, err)
	}
	if len(rec.Nonce) != a.NonceSize() {
		return nil, fmt.Errorf("loading grant for %s from %s: %w", server, p, ErrTokenCorrupt)
	}
	plain, err := a.Open(nil, rec.Nonce, rec.Sealed, rec.Binding.aad())
	if err != nil {
		return nil, fmt.Errorf("loading grant for %s from %s: %w", server, p, ErrTokenCorrupt)
	}
	var g Grant
	err = json.Unmarshal(plain, &g)
	clear(plain)
	if err != nil || (Binding{g.Server, g.Issuer, g.Resource, g.ClientID}) != rec.Binding {
		return nil, fmt.Errorf("loading grant for %s from %s: %w", server, p, ErrTokenCorrupt)
	}
	return &g, nil
}

// Delete removes the grant of server; no grant is not an error.
func (s *FileStore) Delete(ctx context.Context, server string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(s.path(server)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting grant for %s: %w", server, err)
	}
	return nil
}

// Bindings lists the stored logins without opening them (no key needed):
// what `mcpbox ps`/`secrets` may show.
func (s *FileStore) Bindings() ([]Binding, error) {
	ls, err := s.Logins()
	var out []Binding
	for _, l := range ls {
		out = append(out, l.Binding)
	}
	return out, err
}

// Logins is Bindings with each grant's Status.
func (s *FileStore) Logins() ([]StoredLogin, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing grants: %w", err)
	}
	var out []StoredLogin
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), recordExt) {
			continue
		}
		b, err := readPrivate(filepath.Join(s.Dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("listing grants: %w", err)
		}
		var rec sealedRecord
		if json.Unmarshal(b, &rec) != nil {
			continue
		}
		out = append(out, StoredLogin{rec.Binding, rec.Status})
	}
	return out, nil
}

// readPrivate reads a small file that must be a regular file of this
// user with no permission for group or others, not following a symlink.
func readPrivate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %#o: group or others may access it, want 0600", path, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s belongs to uid %d, not to this user", path, st.Uid)
	}
	return io.ReadAll(io.LimitReader(f, maxMetadata))
}

// writePrivate writes b to path with mode 0600 through a temporary file
// that is renamed (replace) or hard-linked (no replace, fails with
// fs.ErrExist if path exists) into place, so a reader never sees half a
// file.
func writePrivate(path string, b []byte, replace bool) error {
	tmp := fmt.Sprintf("%s.tmp%d", path, time.Now().UnixNano())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if replace {
		return os.Rename(tmp, path)
	}
	return os.Link(tmp, path)
}
