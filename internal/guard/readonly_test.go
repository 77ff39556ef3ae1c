package guard

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"mcpbox/internal/config"
	"mcpbox/internal/redact"
)

// TestReadOnlyHint: a server's EROFS, in each runtime's words, is told
// once per server with the path it could not write; other payloads are
// not.
func TestReadOnlyHint(t *testing.T) {
	result := func(text string) []byte {
		b, err := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": text}}, "isError": true})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tt := range []struct{ name, text, path string }{
		{"node", "EROFS: read-only file system, open '/opt/mcpbox/pkg/node_modules/m/dist/memory.jsonl.5f.tmp'", "/opt/mcpbox/pkg/node_modules/m/dist/memory.jsonl.5f.tmp"},
		{"python", "[Errno 30] Read-only file system: '/workspace/input/notes.db'", "/workspace/input/notes.db"},
		{"go", "open /workspace/input/out.txt: read-only file system", "/workspace/input/out.txt"},
		{"rust", "Read-only file system (os error 30)", "a path"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			h := NewReadOnlyHint(slog.New(slog.NewTextHandler(&out, nil)))
			h.See("s", result("all fine"))
			if out.Len() != 0 {
				t.Fatalf("told of a payload without the error: %s", out.String())
			}
			h.See("s", result(tt.text))
			if want := "server s could not write to " + tt.path + ": the sandbox shows it read-only"; !strings.Contains(out.String(), want) {
				t.Fatalf("told %q, want %q", out.String(), want)
			}
			told := out.Len()
			h.See("s", result(tt.text))
			if out.Len() != told {
				t.Errorf("told twice: %s", out.String())
			}
			h.See("t", result(tt.text))
			if !strings.Contains(out.String()[told:], "server t could not write") {
				t.Errorf("another server not told: %s", out.String())
			}
		})
	}
}

// TestGuardFilterTellsReadOnly: serve's gateway filter tells of it, on
// the redacted payload, which it passes on unchanged otherwise.
func TestGuardFilterTellsReadOnly(t *testing.T) {
	c, err := config.Load("guard.yaml", []byte(guardTestConfig))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	book := &redact.Book{}
	const secret = "s3cr3t-value-0123456789abcdef"
	if err := book.Add("token", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	g, err := New(c, Options{StateDir: dir, LockPath: filepath.Join(dir, "mcpbox.lock")}, slog.New(slog.NewTextHandler(&out, nil)), book)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	got := g.Hooks().Filter("echo", []byte(`{"content":[{"type":"text","text":"EROFS: read-only file system, mkdir '/workspace/input/`+secret+`'"}]}`))
	if !bytes.Contains(got, []byte("EROFS: read-only file system, mkdir '/workspace/input/")) || bytes.Contains(got, []byte(secret)) {
		t.Fatalf("the payload passed on: %s", got)
	}
	if !strings.Contains(out.String(), "server echo could not write to /workspace/input/") || strings.Contains(out.String(), secret) {
		t.Fatalf("told %q", out.String())
	}
}
