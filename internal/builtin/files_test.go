//go:build linux

package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestListFiles(t *testing.T) { bothResolvers(t, testListFiles) }

func testListFiles(t *testing.T) {
	w := newWorkspace(t, Options{})
	writeHost(t, filepath.Join(w.in, "README.md"), "hello\n")
	writeHost(t, filepath.Join(w.in, "src", "main.go"), "package main\n")
	writeHost(t, filepath.Join(w.in, "src", "deep", "x.go"), "package deep\n")
	writeHost(t, filepath.Join(w.out, "report.txt"), "1234567")
	if err := os.Symlink("README.md", filepath.Join(w.in, "readme-link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args map[string]any
		want []string
	}{
		{"roots", map[string]any{}, []string{"input/", "output/"}},
		{"roots depth 2", map[string]any{"depth": 2}, []string{"input/", "input/README.md  (6 bytes)", "input/readme-link  (symlink)",
			"input/src/", "output/", "output/report.txt  (7 bytes)"}},
		{"input", map[string]any{"path": "input"}, []string{"input/README.md  (6 bytes)", "input/readme-link  (symlink)", "input/src/"}},
		{"absolute form", map[string]any{"path": "/workspace/input/src"}, []string{"input/src/deep/", "input/src/main.go  (13 bytes)"}},
		{"glob recursive", map[string]any{"path": "input", "glob": "*.go", "depth": 5}, []string{"input/src/deep/x.go  (13 bytes)", "input/src/main.go  (13 bytes)"}},
		{"glob with slash", map[string]any{"path": "input", "glob": "src/*", "depth": 5}, []string{"input/src/deep/", "input/src/main.go  (13 bytes)"}},
		{"empty", map[string]any{"path": "input", "glob": "*.rs"}, []string{"[no entries]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := w.mustOK(t, "list_files", tt.args)
			if want := strings.Join(tt.want, "\n") + "\n"; got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestListFilesPaging(t *testing.T) {
	w := newWorkspace(t, Options{})
	const n = listPage + 50
	for i := range n {
		writeHost(t, filepath.Join(w.out, "many", fmt.Sprintf("f%03d", i)), "")
	}
	var all []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("paging does not end")
		}
		got := w.mustOK(t, "list_files", map[string]any{"path": "output/many", "cursor": cursor})
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		last := lines[len(lines)-1]
		if _, after, ok := strings.Cut(last, "next cursor: "); ok {
			cursor = strings.TrimSuffix(after, "]")
			lines = lines[:len(lines)-1]
		} else {
			cursor = ""
		}
		if len(lines) > listPage {
			t.Fatalf("page has %d entries, cap is %d", len(lines), listPage)
		}
		all = append(all, lines...)
		if cursor == "" {
			break
		}
	}
	if len(all) != n {
		t.Fatalf("listed %d entries over all pages, want %d", len(all), n)
	}
	for i, l := range all {
		if want := fmt.Sprintf("output/many/f%03d  (0 bytes)", i); l != want {
			t.Fatalf("entry %d = %q, want %q", i, l, want)
		}
	}
	w.mustFail(t, "list_files", map[string]any{"path": "output", "cursor": "x"}, "bad cursor")
}

func TestReadFile(t *testing.T) { bothResolvers(t, testReadFile) }

func testReadFile(t *testing.T) {
	w := newWorkspace(t, Options{})
	writeHost(t, filepath.Join(w.in, "lines.txt"), "one\ntwo\nthree\nfour\n")
	writeHost(t, filepath.Join(w.in, "nul.bin"), "abc\x00def")
	writeHost(t, filepath.Join(w.in, "latin1.txt"), "caf\xe9\n")
	writeHost(t, filepath.Join(w.in, "empty"), "")
	if err := os.Symlink("lines.txt", filepath.Join(w.in, "inner-link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"whole", map[string]any{"path": "input/lines.txt"}, "one\ntwo\nthree\nfour\n"},
		{"range", map[string]any{"path": "input/lines.txt", "start_line": 2, "end_line": 3}, "two\nthree\n"},
		{"from line", map[string]any{"path": "input/lines.txt", "start_line": 4}, "four\n"},
		{"absolute form", map[string]any{"path": "/workspace/input/lines.txt", "end_line": 1}, "one\n"},
		{"symlink inside root", map[string]any{"path": "input/inner-link", "end_line": 1}, "one\n"},
		{"nul is binary", map[string]any{"path": "input/nul.bin"}, "input/nul.bin is a binary file (7 bytes); not shown"},
		{"bad utf-8 is binary", map[string]any{"path": "input/latin1.txt"}, "input/latin1.txt is a binary file (5 bytes); not shown"},
		{"empty", map[string]any{"path": "input/empty"}, "[empty]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := w.mustOK(t, "read_file", tt.args); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("errors", func(t *testing.T) {
		w.mustFail(t, "read_file", map[string]any{"path": "input/lines.txt", "start_line": 9}, "past the end")
		w.mustFail(t, "read_file", map[string]any{"path": "input/lines.txt", "start_line": 3, "end_line": 2}, "before start_line")
		w.mustFail(t, "read_file", map[string]any{"path": "input/missing"}, "input/missing: no such file")
		w.mustFail(t, "read_file", map[string]any{"path": "input"}, "not a regular file")
		w.mustFail(t, "read_file", map[string]any{"path": "lines.txt"}, `must start with "input/"`)
	})
}

func TestReadFileCap(t *testing.T) {
	w := newWorkspace(t, Options{})
	line := strings.Repeat("x", 99) + "\n"
	writeHost(t, filepath.Join(w.in, "big.txt"), strings.Repeat(line, 2*readCap/len(line)))
	got := w.mustOK(t, "read_file", map[string]any{"path": "input/big.txt"})
	body, note, ok := strings.Cut(got, "\n[truncated at 1024 KiB")
	if !ok {
		t.Fatalf("no truncation note in %d bytes of output", len(got))
	}
	if len(body) != readCap {
		t.Errorf("returned %d bytes of content, want the cap %d", len(body), readCap)
	}
	wantLine := readCap/len(line) + 1
	if want := fmt.Sprintf("continue with start_line=%d]", wantLine); !strings.Contains(note, want) {
		t.Errorf("note %q does not contain %q", note, want)
	}
}

func TestSearchFiles(t *testing.T) { bothResolvers(t, testSearchFiles) }

func testSearchFiles(t *testing.T) {
	w := newWorkspace(t, Options{})
	writeHost(t, filepath.Join(w.in, "a.go"), "package a\nfunc Hello() {}\n")
	writeHost(t, filepath.Join(w.in, "sub", "b.txt"), "nothing\nsay hello\nHello again\n")
	writeHost(t, filepath.Join(w.in, "bin.dat"), "Hello\x00binary")
	writeHost(t, filepath.Join(w.in, "huge.txt"), "Hello\n"+strings.Repeat("z", searchFileCap))
	writeHost(t, filepath.Join(w.out, "notes.md"), "Hello from output\n")
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"everywhere", map[string]any{"pattern": "Hello"},
			"input/a.go:2:func Hello() {}\ninput/sub/b.txt:3:Hello again\noutput/notes.md:1:Hello from output\n[2 binary, large or unreadable files skipped]\n"},
		{"case-insensitive in dir", map[string]any{"pattern": "(?i)hello", "path": "input/sub"},
			"input/sub/b.txt:2:say hello\ninput/sub/b.txt:3:Hello again\n"},
		{"glob", map[string]any{"pattern": "Hello", "glob": "*.go"}, "input/a.go:2:func Hello() {}\n"},
		{"single file", map[string]any{"pattern": "^package", "path": "input/a.go"}, "input/a.go:1:package a\n"},
		{"none", map[string]any{"pattern": "absent", "path": "output"}, "[no matches]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := w.mustOK(t, "search_files", tt.args); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	t.Run("bad pattern", func(t *testing.T) {
		w.mustFail(t, "search_files", map[string]any{"pattern": "("}, "bad pattern")
	})
	t.Run("match cap", func(t *testing.T) {
		writeHost(t, filepath.Join(w.out, "many.txt"), strings.Repeat("match\n", 3*searchMatches))
		got := w.mustOK(t, "search_files", map[string]any{"pattern": "^match$", "path": "output"})
		if n := strings.Count(got, ":match\n"); n != searchMatches {
			t.Errorf("%d matches returned, want the cap %d", n, searchMatches)
		}
		if !strings.Contains(got, "[stopped at 200 matches") {
			t.Errorf("no cap note in output tail %q", got[len(got)-100:])
		}
	})
}

func TestWriteAndEdit(t *testing.T) { bothResolvers(t, testWriteAndEdit) }

func testWriteAndEdit(t *testing.T) {
	w := newWorkspace(t, Options{})
	host := func(rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(w.out, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	w.mustOK(t, "write_file", map[string]any{"path": "output/a/b/c.txt", "content": "alpha\nbeta\n"})
	if got := host("a/b/c.txt"); got != "alpha\nbeta\n" {
		t.Errorf("after write: %q", got)
	}
	if err := os.Chmod(filepath.Join(w.out, "a/b/c.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.mustOK(t, "write_file", map[string]any{"path": "/workspace/output/a/b/c.txt", "content": "alpha\nbeta\nbeta\n"})
	if st, err := os.Stat(filepath.Join(w.out, "a/b/c.txt")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("overwrite did not keep the mode: %v %v", st.Mode(), err)
	}
	w.mustOK(t, "edit_file", map[string]any{"path": "output/a/b/c.txt", "old": "alpha", "new": "gamma"})
	if got := host("a/b/c.txt"); got != "gamma\nbeta\nbeta\n" {
		t.Errorf("after edit: %q", got)
	}
	w.mustFail(t, "edit_file", map[string]any{"path": "output/a/b/c.txt", "old": "beta", "new": "x"}, "occurs 2 times")
	w.mustFail(t, "edit_file", map[string]any{"path": "output/a/b/c.txt", "old": "delta", "new": "x"}, "not found")
	w.mustFail(t, "edit_file", map[string]any{"path": "output/a/b/c.txt", "old": "", "new": "x"}, "old is empty")
	if got := host("a/b/c.txt"); got != "gamma\nbeta\nbeta\n" {
		t.Errorf("failed edits changed the file: %q", got)
	}
	w.mustFail(t, "write_file", map[string]any{"path": "output/a", "content": "x"}, "is a directory")
	w.mustFail(t, "write_file", map[string]any{"path": "output", "content": "x"}, "not a file path")
	entries, _ := os.ReadDir(filepath.Join(w.out, "a/b"))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestLooksBinary(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"ascii", "hello\n", false},
		{"utf-8", "grüße ✓\n", false},
		{"rune cut at the sniff boundary", "ab✓"[:4], false},
		{"nul", "a\x00b", true},
		{"latin-1", "caf\xe9\n", true},
		{"bad byte then cut rune", "\xff" + "✓"[:2], true},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := looksBinary([]byte(tt.in)); got != tt.want {
				t.Errorf("looksBinary(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// TestSearchCostBound: a short pattern with a huge program over a file of
// near-matches stops within the cost bound instead of running for
// minutes; a plain pattern still searches the same file.
func TestSearchCostBound(t *testing.T) {
	defer func(c int64) { searchCost = c }(searchCost)
	searchCost = 1e7 // the same bound, reached with a tenth of the work
	w := newWorkspace(t, Options{})
	writeHost(t, filepath.Join(w.in, "a.txt"), strings.Repeat(strings.Repeat("a", 200)+"\n", 20000))
	start := time.Now()
	got := w.mustOK(t, "search_files", map[string]any{"pattern": "(?:.{0,100}a){10}x", "path": "input/a.txt"})
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the costly search ran %s", d)
	}
	if !strings.Contains(got, "too costly") {
		t.Fatalf("got %q, want a note that the search stopped", got)
	}
	if got := w.mustOK(t, "search_files", map[string]any{"pattern": "b", "path": "input/a.txt"}); got != "[no matches]\n" {
		t.Fatalf("plain search: %q", got)
	}
}

// TestOddNamesAreQuoted: a planted file name with a newline cannot forge
// a line of a listing or of search results.
func TestOddNamesAreQuoted(t *testing.T) {
	w := newWorkspace(t, Options{})
	writeHost(t, filepath.Join(w.in, "a\ninput/FORGED.txt"), "x\n")
	for _, tool := range []struct {
		name string
		args map[string]any
	}{
		{"list_files", map[string]any{"path": "input"}},
		{"search_files", map[string]any{"pattern": "x", "path": "input"}},
	} {
		got := w.mustOK(t, tool.name, tool.args)
		for _, line := range strings.Split(got, "\n") {
			if strings.HasPrefix(line, "input/FORGED") || strings.HasPrefix(line, "FORGED") {
				t.Errorf("%s: forged line %q in\n%s", tool.name, line, got)
			}
		}
		if !strings.Contains(got, `\n`) {
			t.Errorf("%s: the name is not shown quoted:\n%s", tool.name, got)
		}
	}
}
