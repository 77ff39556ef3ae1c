package pkginstall

import (
	"os"
	"path/filepath"
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
