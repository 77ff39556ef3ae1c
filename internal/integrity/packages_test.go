package integrity

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPackagePins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpbox.lock")
	// A lock file from before packages: tool pins only.
	pins, err := OpenPins(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pins.Check("s", ModeTOFU, KindTool, []Item{{Key: "t", Raw: json.RawMessage(`{"name":"t"}`)}}); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	if strings.Contains(string(old), "packages") {
		t.Fatalf("a lock without packages writes a packages key:\n%s", old)
	}
	if _, ok, err := ReadPackagePin(path, "s"); err != nil || ok {
		t.Fatalf("old lock: ok=%v err=%v", ok, err)
	}
	pin := PackagePin{Ecosystem: "npm", Name: "@scope/x", Version: "1.2.3", Source: "npm:@scope/x@^1",
		Integrity: "sha512-" + strings.Repeat("A", 86) + "==", Lockfile: "sha512-" + strings.Repeat("B", 86) + "=="}
	if err := WritePackagePin(path, "s", pin); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadPackagePin(path, "s")
	if err != nil || !ok || got != pin {
		t.Fatalf("got %+v ok=%v err=%v", got, ok, err)
	}
	// The tool pins survive a package write, and the package a tool write.
	l, err := ReadLock(path)
	if err != nil || len(l.Servers["s"].Tools) != 1 {
		t.Fatalf("tool pins lost: %v", err)
	}
	if err := pins.Record("s", ServerInfo{}, map[string][]Item{KindTool: {{Key: "u", Raw: json.RawMessage(`{"name":"u"}`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ReadPackagePin(path, "s"); !ok {
		t.Fatal("a tool pin write lost the package pin")
	}
	// Bad pins are refused on write and on read.
	bad := pin
	bad.Integrity = "md5-abc"
	if err := WritePackagePin(path, "s", bad); err == nil {
		t.Fatal("bad integrity written")
	}
	data, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(data), `"ecosystem": "npm"`, `"ecosystem": "cargo"`, 1)), 0o644)
	if _, err := ReadLock(path); err == nil || !strings.Contains(err.Error(), `package of server "s": unknown ecosystem "cargo"`) {
		t.Fatalf("edited lock: %v", err)
	}
	os.WriteFile(path, data, 0o644)
	if err := WritePackagePin(path, "s", PackagePin{}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ReadPackagePin(path, "s"); ok {
		t.Fatal("zero pin did not remove")
	}
}
