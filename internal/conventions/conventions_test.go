package conventions

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// goFiles maps each directory of the module (outside testdata) to its
// non-generated Go files.
func goFiles(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string][]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func TestOnePackageDocPerDirectory(t *testing.T) {
	for dir, files := range goFiles(t) {
		var docs []string
		for _, f := range files {
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if parsed.Doc != nil {
				docs = append(docs, filepath.Base(f))
			}
		}
		if len(docs) != 1 {
			t.Errorf("%s: %d files carry a package doc %v, want exactly one", dir, len(docs), docs)
		}
	}
}

func TestUnsafeOnlyInUnsafeFiles(t *testing.T) {
	for _, files := range goFiles(t) {
		for _, f := range files {
			if strings.HasSuffix(f, "_unsafe.go") || strings.HasSuffix(f, "_test.go") {
				continue
			}
			for _, imp := range imports(t, f) {
				if imp == "unsafe" {
					t.Errorf("%s imports unsafe; keep that in a *_unsafe.go file", f)
				}
			}
		}
	}
}

// plainData packages parse and validate bytes: no files, processes,
// network or syscalls.
var plainData = map[string][]string{
	"internal/config": {"os", "os/exec", "net", "net/http", "syscall", "golang.org/x/sys/unix", "io/fs"},
	// Decisions are pure functions of the config and the call.
	"internal/policy": {"os", "os/exec", "net", "net/http", "syscall", "golang.org/x/sys/unix", "io/fs"},
	"internal/redact": {"net", "golang.org/x/sys/unix"},
	// Client configs in, a config out: the command reads and writes files.
	"internal/importer": {"os", "os/exec", "net", "net/http", "syscall", "golang.org/x/sys/unix", "io/fs"},
}

func TestPlainDataImports(t *testing.T) {
	root, _ := filepath.Abs("../..")
	for pkg, banned := range plainData {
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no files (%v)", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			for _, imp := range imports(t, f) {
				if slices.Contains(banned, imp) {
					t.Errorf("%s imports %s; %s must stay plain data", f, imp, pkg)
				}
			}
		}
	}
}

func imports(t *testing.T, file string) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := parser.ParseFile(token.NewFileSet(), file, src, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range parsed.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		out = append(out, p)
	}
	return out
}
