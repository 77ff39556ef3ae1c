package oauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleGrant(resource string) *Grant {
	return &Grant{
		Server: resource, Issuer: "https://as.example", Resource: resource, ClientID: "client-1",
		ClientSecret: "CLIENT-SECRET-0123456789", AuthMethod: AuthSecretBasic,
		TokenEndpoint: "https://as.example/token",
		AccessToken:   "ACCESS-TOKEN-abcdefghijklmnop", RefreshToken: "REFRESH-TOKEN-qrstuvwxyz",
		Expiry: time.Now().Add(time.Hour).Round(time.Second), Scope: "mcp:read",
	}
}

func TestFileStoreEncryptedAndPrivate(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	g := sampleGrant("https://mcp.example/mcp")
	if err := s.Save(ctx, g); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(s.Dir, "*"))
	if len(files) != 1 {
		t.Fatalf("store dir holds %v, want one file", files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{g.AccessToken, g.RefreshToken, g.ClientSecret} {
		for _, enc := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), secret[:12]} {
			if bytes.Contains(raw, []byte(enc)) {
				t.Errorf("the grant file holds %q in a readable form", secret[:8])
			}
		}
	}
	for _, p := range []string{files[0], string(s.Keys.(KeyFile))} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	if fi, _ := os.Stat(s.Dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("store dir mode %v, want 0700", fi.Mode().Perm())
	}
	got, err := s.Load(ctx, g.Resource)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Expiry.Equal(g.Expiry) {
		t.Errorf("round trip: expiry %v, want %v", got.Expiry, g.Expiry)
	}
	got.Expiry = g.Expiry
	if *got != *g {
		t.Errorf("round trip: got %#v", got)
	}
	bs, err := s.Bindings()
	if err != nil || len(bs) != 1 || bs[0] != (Binding{g.Server, g.Issuer, g.Resource, g.ClientID}) {
		t.Errorf("bindings %v %v", bs, err)
	}
	ls, err := s.Logins()
	if err != nil || len(ls) != 1 || !ls[0].Expiry.Equal(g.Expiry) || ls[0].Refreshable != (g.RefreshToken != "") || ls[0].Scope != g.Scope {
		t.Errorf("logins %+v %v, want the grant's expiry, refreshability and scope", ls, err)
	}
	// A new store with the same key file opens it; another key does not.
	s2 := &FileStore{Dir: s.Dir, Keys: s.Keys}
	if _, err := s2.Load(ctx, g.Resource); err != nil {
		t.Errorf("same key: %v", err)
	}
	s3 := &FileStore{Dir: s.Dir, Keys: KeyFile(filepath.Join(t.TempDir(), "other.key"))}
	if _, err := s3.Load(ctx, g.Resource); !errors.Is(err, ErrTokenCorrupt) {
		t.Errorf("other key: %v, want ErrTokenCorrupt", err)
	}
}

func TestFileStoreRefusals(t *testing.T) {
	ctx := context.Background()
	res := "https://mcp.example/mcp"

	t.Run("binding edited", func(t *testing.T) {
		s := testStore(t)
		s.Save(ctx, sampleGrant(res))
		p := s.path(res)
		raw, _ := os.ReadFile(p)
		var rec map[string]any
		json.Unmarshal(raw, &rec)
		rec["issuer"] = "https://evil.example"
		rec["server"] = res
		b, _ := json.Marshal(rec)
		os.WriteFile(p, b, 0o600)
		if _, err := s.Load(ctx, res); !errors.Is(err, ErrTokenCorrupt) {
			t.Errorf("load: %v, want ErrTokenCorrupt", err)
		}
	})
	t.Run("record moved to another resource", func(t *testing.T) {
		s := testStore(t)
		s.Save(ctx, sampleGrant(res))
		other := "https://other.example/mcp"
		if err := os.Rename(s.path(res), s.path(other)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx, other); !errors.Is(err, ErrTokenCorrupt) {
			t.Errorf("load: %v, want ErrTokenCorrupt", err)
		}
	})
	t.Run("ciphertext flipped", func(t *testing.T) {
		s := testStore(t)
		s.Save(ctx, sampleGrant(res))
		raw, _ := os.ReadFile(s.path(res))
		var rec sealedRecord
		json.Unmarshal(raw, &rec)
		rec.Sealed[3] ^= 1
		b, _ := json.Marshal(rec)
		os.WriteFile(s.path(res), b, 0o600)
		if _, err := s.Load(ctx, res); !errors.Is(err, ErrTokenCorrupt) {
			t.Errorf("load: %v, want ErrTokenCorrupt", err)
		}
	})
	t.Run("grant file readable by others", func(t *testing.T) {
		s := testStore(t)
		s.Save(ctx, sampleGrant(res))
		os.Chmod(s.path(res), 0o644)
		if _, err := s.Load(ctx, res); err == nil || !strings.Contains(err.Error(), "0600") {
			t.Errorf("load: %v, want a mode refusal", err)
		}
	})
	t.Run("key file readable by others", func(t *testing.T) {
		s := testStore(t)
		s.Save(ctx, sampleGrant(res))
		os.Chmod(string(s.Keys.(KeyFile)), 0o640)
		if _, err := s.Load(ctx, res); err == nil || !strings.Contains(err.Error(), "key") {
			t.Errorf("load: %v, want a key refusal", err)
		}
	})
	t.Run("grant file is a symlink", func(t *testing.T) {
		s := testStore(t)
		s.Save(ctx, sampleGrant(res))
		p := s.path(res)
		os.Rename(p, p+".real")
		os.Symlink(p+".real", p)
		if _, err := s.Load(ctx, res); err == nil || errors.Is(err, ErrNoToken) {
			t.Errorf("load through a symlink: %v", err)
		}
	})
	t.Run("no grant", func(t *testing.T) {
		if _, err := testStore(t).Load(ctx, res); !errors.Is(err, ErrNoToken) {
			t.Errorf("load: %v, want ErrNoToken", err)
		}
	})
	t.Run("unbound grant", func(t *testing.T) {
		g := sampleGrant(res)
		g.Issuer = ""
		if err := testStore(t).Save(ctx, g); err == nil {
			t.Error("saved a grant without an issuer")
		}
	})
}

func TestKeyFunc(t *testing.T) {
	ctx := context.Background()
	raw := bytes.Repeat([]byte{7}, 32)
	for name, c := range map[string]struct {
		v    string
		ok   bool
		want []byte
	}{
		"base64":        {base64.StdEncoding.EncodeToString(raw) + "\n", true, raw},
		"hex":           {strings.Repeat("07", 32), true, raw},
		"long random":   {"correct-horse-battery-staple-0123456789", true, nil},
		"short":         {"hunter2hunter2", false, nil},
		"empty":         {"", false, nil},
		"base64 16 raw": {base64.StdEncoding.EncodeToString(raw[:16]), false, nil},
	} {
		t.Run(name, func(t *testing.T) {
			k, err := KeyFunc(func(context.Context) ([]byte, error) { return []byte(c.v), nil }).Key(ctx)
			if (err == nil) != c.ok {
				t.Fatalf("key: %v, want ok=%v", err, c.ok)
			}
			if c.ok && len(k) != 32 {
				t.Errorf("key of %d bytes", len(k))
			}
			if c.want != nil && !bytes.Equal(k, c.want) {
				t.Errorf("key %x, want %x", k, c.want)
			}
			if err != nil && c.v != "" && strings.Contains(err.Error(), c.v) {
				t.Errorf("error carries the value: %v", err)
			}
		})
	}
	// A provider's store works end to end.
	dir := t.TempDir()
	s := &FileStore{Dir: dir, Keys: KeyFunc(func(context.Context) ([]byte, error) { return []byte(strings.Repeat("ab", 32)), nil })}
	if err := s.Save(ctx, sampleGrant("https://x.example/mcp")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "https://x.example/mcp"); err != nil {
		t.Fatal(err)
	}
	failing := &FileStore{Dir: dir, Keys: KeyFunc(func(context.Context) ([]byte, error) { return nil, errors.New("pass: not found") })}
	if _, err := failing.Load(ctx, "https://x.example/mcp"); err == nil || !strings.Contains(err.Error(), "pass: not found") {
		t.Errorf("failing provider: %v", err)
	}
}

// The grant lock's file must be this user's regular file: one another
// user made (in a dir they could write) would let them hold the lock,
// and stop every refresh.
func TestLockGrantRefusesForeignFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a file of another user needs root")
	}
	s := testStore(t)
	const server = "https://mcp.example.com/mcp"
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	lock := s.path(server) + ".lock"
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(lock, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LockGrant(context.Background(), server); err == nil || !strings.Contains(err.Error(), "not a regular file of this user") {
		t.Errorf("LockGrant with another user's lock file: %v", err)
	}
	os.Remove(lock)
	unlock, err := s.LockGrant(context.Background(), server)
	if err != nil {
		t.Fatalf("LockGrant: %v", err)
	}
	unlock()
}
