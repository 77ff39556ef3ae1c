package pkginstall

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCleanStaging(t *testing.T) {
	in := &Installer{Store: t.TempDir()}
	if err := in.CleanStaging(time.Hour); err != nil {
		t.Fatalf("a store without staging: %v", err)
	}
	old, err := stagingDir(in.Store)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(old, "f"), []byte("x"), 0o644)
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	young, _ := stagingDir(in.Store)
	if err := in.CleanStaging(time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old staging dir still there: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("young staging dir (an install in progress) removed: %v", err)
	}
}

func TestEntryDirRefusesHostileNames(t *testing.T) {
	good := Pin{Ecosystem: NPM, Name: "@s/x", Version: "1.0.0", Integrity: sri([]byte("x"))}
	if _, err := entryDir("/store", good); err != nil {
		t.Fatal(err)
	}
	for _, p := range []Pin{
		{Ecosystem: NPM, Name: "../../etc", Version: "1.0.0", Integrity: good.Integrity},
		{Ecosystem: NPM, Name: "x", Version: "../../1.0.0", Integrity: good.Integrity},
		{Ecosystem: NPM, Name: "x", Version: "1.0.0/..", Integrity: good.Integrity},
		{Ecosystem: NPM, Name: "x", Version: "^1", Integrity: good.Integrity},
		{Ecosystem: NPM, Name: "x", Version: "1.0.0", Integrity: "sha1-AAAA"},
		{Ecosystem: "cargo", Name: "x", Version: "1.0.0", Integrity: good.Integrity},
		{Ecosystem: PyPI, Name: "x/y", Version: "1.0", Integrity: sri256([]byte("x"))},
	} {
		if d, err := entryDir("/store", p); err == nil {
			t.Errorf("entryDir(%+v) = %s, want an error", p, d)
		}
	}
}

func TestInstallRefusesHostileSource(t *testing.T) {
	in := &Installer{Store: t.TempDir()}
	for _, src := range []Source{
		{Ecosystem: NPM, Name: "../../x", Version: "1.0.0"},
		{Ecosystem: NPM, Name: "x", Version: "../1.0.0"},
		{Ecosystem: PyPI, Name: "a/b", Version: "1.0"},
		{Ecosystem: NPM, Name: "x", Version: "1.0.0", Bin: "../sh"},
		{Ecosystem: "deb", Name: "x", Version: "1"},
	} {
		if _, err := in.Install(t.Context(), src, nil); err == nil {
			t.Errorf("Install(%+v) succeeded", src)
		}
	}
}

// An install waiting for another's entry lock says so once and gives up
// when its context ends; the lock is free again once released, and
// another entry's lock is never held by it.
func TestLockEntryWaitsBounded(t *testing.T) {
	store := t.TempDir()
	dst := filepath.Join(store, "npm", "a", "1.0.0", "sha512-00")
	unlock, err := lockEntry(context.Background(), store, dst, func() { t.Error("the first lock waited") })
	if err != nil {
		t.Fatal(err)
	}
	other, err := lockEntry(context.Background(), store, filepath.Join(store, "npm", "b", "1.0.0", "sha512-00"), func() { t.Error("another entry's lock waited") })
	if err != nil {
		t.Fatal(err)
	}
	other()

	ctx, cancel := context.WithTimeout(context.Background(), 3*entryLockPoll)
	defer cancel()
	var waits int
	if _, err := lockEntry(ctx, store, dst, func() { waits++ }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second lock while the first is held: %v, want the context's deadline", err)
	}
	if waits != 1 {
		t.Errorf("waiting called %d times, want once", waits)
	}

	unlock()
	again, err := lockEntry(context.Background(), store, dst, func() { t.Error("a released lock waited") })
	if err != nil {
		t.Fatal(err)
	}
	again()
}

// claimEntry hands out an entry another install made against the pin
// itself, also where the pin spells the version otherwise than the index
// resolved it (PEP 440: "1.0" is "1.0.0"); a pin whose lockfile the entry
// lacks is refused. It never returns no package, no error and no lock.
func TestClaimEntryChecksEntryAgainstPin(t *testing.T) {
	in := &Installer{Store: t.TempDir()}
	sum := sha256.Sum256([]byte("wheel"))
	got := Pin{Ecosystem: PyPI, Name: "foo", Version: "1.0.0", Integrity: "sha256-" + base64.StdEncoding.EncodeToString(sum[:])}
	dst, err := entryDir(in.Store, got)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dst, "site", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	lock := []byte("foo==1.0.0 --hash=sha256:00\n")
	got.Lockfile = sri(lock)
	os.WriteFile(filepath.Join(dst, "requirements.lock"), lock, 0o644)
	os.WriteFile(filepath.Join(dst, "site", "bin", "foo"), []byte("#!/bin/sh\n"), 0o755)
	data, _ := json.Marshal(manifest{Pin: got, Bins: map[string]string{"foo": "site/bin/foo"}})
	if err := os.WriteFile(filepath.Join(dst, manifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	src := Source{Ecosystem: PyPI, Name: "foo", Version: "1.0.0"}
	pin := got
	pin.Version = "1.0"
	pkg, unlock, err := in.claimEntry(context.Background(), dst, src, &pin)
	if err != nil || pkg == nil || unlock != nil || pkg.Dir != dst {
		t.Fatalf("claimEntry with the pin spelled 1.0: %+v, unlock %v, %v; want the entry at %s", pkg, unlock != nil, err, dst)
	}
	pin.Lockfile = "sha512-" + strings.Repeat("A", 86) + "=="
	if pkg, unlock, err := in.claimEntry(context.Background(), dst, src, &pin); err == nil || pkg != nil || unlock != nil {
		t.Errorf("claimEntry with another lockfile pinned: %+v, unlock %v, %v; want it refused", pkg, unlock != nil, err)
	}
}
