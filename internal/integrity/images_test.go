package integrity

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	digestA = "sha256:" + strings.Repeat("a", 64)
	digestB = "sha256:" + strings.Repeat("b", 64)
)

// TestImagePinsBesideToolPins: an image pin is written next to the tool
// pins, survives a tool-pin write by another writer, and a lock file
// without images (an old one) still reads.
func TestImagePinsBesideToolPins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpbox.lock")
	old := `{"servers": {}, "version": 1}`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := ReadLock(path); err != nil || len(l.Images) != 0 {
		t.Fatalf("old lock file: %v, images %v", err, l.Images)
	}
	pin := ImagePin{Ref: "127.0.0.1:5000/t/mcp:v1", Digest: digestA, Index: digestB, Platform: "linux/amd64"}
	if err := SetImagePin(path, "srv", pin); err != nil {
		t.Fatal(err)
	}
	pins, err := OpenPins(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pins.Record("srv", ServerInfo{Name: "x"}, map[string][]Item{KindTool: {{Key: "t", Raw: json.RawMessage(`{"name":"t"}`)}}}); err != nil {
		t.Fatal(err)
	}
	l, err := ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := l.Image("srv")
	if !ok || got != pin || got.Resolved() != digestB {
		t.Fatalf("image pin after a tool-pin write: %+v %v", got, ok)
	}
	if len(l.Servers["srv"].Tools) != 1 {
		t.Fatalf("tool pins lost: %+v", l.Servers["srv"])
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), `"images": {`) || strings.Index(string(raw), `"images"`) > strings.Index(string(raw), `"servers"`) {
		t.Fatalf("want a sorted images section:\n%s", raw)
	}
	// Rewriting the same pins gives the same bytes.
	again, err := l.Marshal()
	if err != nil || string(again) != string(raw) {
		t.Fatalf("not deterministic: %v\n%s\n%s", err, again, raw)
	}
}

// TestImagePinRejectsMalformed: a hand-edited digest makes the file
// unreadable, and SetImagePin refuses to write one.
func TestImagePinRejectsMalformed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpbox.lock")
	bad := `{"images": {"srv": {"digest": "sha256:abc", "ref": "x"}}, "servers": {}, "version": 1}`
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLock(path); !errors.Is(err, ErrImagePin) || !strings.Contains(err.Error(), `"srv"`) {
		t.Fatalf("ReadLock: %v, want ErrImagePin naming the server", err)
	}
	if err := SetImagePin(path+"2", "srv", ImagePin{Ref: "x", Digest: "sha256:../../x"}); !errors.Is(err, ErrImagePin) {
		t.Fatalf("SetImagePin: %v", err)
	}
	if err := SetImagePin(path+"2", "srv", ImagePin{Digest: digestA}); !errors.Is(err, ErrImagePin) {
		t.Fatalf("SetImagePin without ref: %v", err)
	}
}
