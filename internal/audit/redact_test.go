package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const planted = "sk-PLANTED-7f3a9c1e5b"

func redactPlanted(s string) string { return strings.ReplaceAll(s, planted, "[REDACTED:key]") }

// secretRecord carries the planted secret in every kind of field.
func secretRecord() Record {
	r := callRecord(1)
	r.Tool = "t-" + planted
	r.Error = "auth failed for " + planted
	r.ArgShape = json.RawMessage(`{"` + planted + `":{"string":3}}`)
	r.Payload = json.RawMessage(`{"token":"` + planted + `"}`)
	r.Files = []File{{Path: "/w/" + planted}}
	r.Domains = []Domain{{Host: planted + ".example"}}
	r.Packages = []Package{{Name: planted, Version: planted, Host: planted}}
	r.Artifacts = []string{planted}
	r.Findings = []string{"secret@" + planted}
	r.Detail = map[string]string{planted: planted}
	return r
}

// grepDir fails if the planted secret is in any file of dir.
func grepDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(planted)) {
			t.Errorf("secret found in %s", e.Name())
		}
	}
}

func TestRedactEverywhere(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{
		Path: filepath.Join(dir, "audit.db"), JSONL: filepath.Join(dir, "audit.jsonl"),
		IncludePayloads: true, Redact: redactPlanted,
	})
	for range 50 {
		s.Add(secretRecord())
	}
	flush(t, s)
	if _, err := os.Stat(filepath.Join(dir, "audit.db-wal")); err != nil {
		t.Fatalf("expected a WAL file while open: %v", err)
	}
	grepDir(t, dir)
	got, err := s.Query(testCtx(t), Filter{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := secretRecord()
	for _, p := range []*string{&want.Tool, &want.Error, &want.Files[0].Path, &want.Domains[0].Host,
		&want.Packages[0].Name, &want.Packages[0].Version, &want.Packages[0].Host, &want.Artifacts[0], &want.Findings[0]} {
		*p = redactPlanted(*p)
	}
	want.ArgShape = json.RawMessage(`{"[REDACTED:key]":{"string":3}}`)
	want.Payload = json.RawMessage(`{"token":"[REDACTED:key]"}`)
	want.Detail = map[string]string{"[REDACTED:key]": "[REDACTED:key]"}
	if diff := cmp.Diff([]Record{want}, got, ignoreChain); diff != "" {
		t.Errorf("stored record (-want +got):\n%s", diff)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	grepDir(t, dir)
}

func TestPayloads(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("é\"", PayloadLimit) + `"`)
	tests := []struct {
		name    string
		include bool
		in      json.RawMessage
		check   func(t *testing.T, got json.RawMessage)
	}{
		{"dropped by default", false, json.RawMessage(`{"a":1}`), func(t *testing.T, got json.RawMessage) {
			if got != nil {
				t.Errorf("payload %s kept", got)
			}
		}},
		{"kept", true, json.RawMessage(`{"a":1}`), func(t *testing.T, got json.RawMessage) {
			if string(got) != `{"a":1}` {
				t.Errorf("payload %s", got)
			}
		}},
		{"not JSON", true, json.RawMessage(`{"a":`), func(t *testing.T, got json.RawMessage) {
			if string(got) != `"{\"a\":"` {
				t.Errorf("payload %s, want it as a JSON string", got)
			}
		}},
		{"over the limit", true, big, func(t *testing.T, got json.RawMessage) {
			var m struct {
				Truncated bool
				Size      int
				Head      string
			}
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatal(err)
			}
			if len(got) > PayloadLimit || !m.Truncated || m.Size != len(big) ||
				len(m.Head) < PayloadLimit/3 || !strings.HasPrefix(string(big), m.Head) {
				t.Errorf("marker: %d bytes, truncated %v, size %d, head %d bytes", len(got), m.Truncated, m.Size, len(m.Head))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTest(t, Options{IncludePayloads: tt.include})
			r := callRecord(1)
			r.Payload = tt.in
			s.Add(r)
			flush(t, s)
			got, err := s.Query(testCtx(t), Filter{})
			if err != nil || len(got) != 1 {
				t.Fatalf("Query: %d records, %v", len(got), err)
			}
			tt.check(t, got[0].Payload)
		})
	}
}

func TestJSONLMirror(t *testing.T) {
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "audit.jsonl")
	s := openTest(t, Options{Path: filepath.Join(dir, "audit.db"), JSONL: jsonl})
	for i := range 300 {
		s.Add(callRecord(i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReader(filepath.Join(dir, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want, err := r.Query(testCtx(t), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %d: %v", len(got)+1, err)
		}
		got = append(got, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(want) != 300 {
		t.Fatalf("database holds %d records", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSONL vs database (-db +jsonl):\n%s", diff)
	}
}

func TestFilePermissions(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Path: filepath.Join(dir, "audit.db"), JSONL: filepath.Join(dir, "audit.jsonl")})
	s.Add(callRecord(1))
	flush(t, s)
	for _, name := range []string{"audit.db", "audit.db-wal", "audit.db.head", "audit.jsonl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: mode %v, want no group or other access", name, perm)
		}
	}
}
