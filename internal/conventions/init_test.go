package conventions

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoRegexpCompiledAtInit keeps regular expressions out of package
// initialisation. Go runs every linked package's initialisers before
// main, in every process of the one mcpbox binary: `mcpbox exec`, and the
// sandbox init when mcpbox re-executes itself. Compiling them there cost
// ~2 ms of CPU per process (issue 19; docs/performance.md); a package
// compiles its expressions on first use instead (sync.OnceValue).
func TestNoRegexpCompiledAtInit(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for dir, files := range goFiles(t) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(rel, "internal"+string(filepath.Separator)) && !strings.HasPrefix(rel, "cmd"+string(filepath.Separator)) {
			continue
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			checked++
			for _, pos := range initCompiles(t, f) {
				t.Errorf("%s: a regexp compiled at package initialisation; compile it on first use (sync.OnceValue)", pos)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no Go files checked")
	}
}

// initCompiles returns where file's package-level declarations and init
// functions call regexp.Compile or regexp.MustCompile outside a function
// literal (which runs only when called).
func initCompiles(t *testing.T, file string) []string {
	t.Helper()
	fset := token.NewFileSet()
	parsed, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	regexpName := ""
	for _, imp := range parsed.Imports {
		if imp.Path.Value == `"regexp"` {
			regexpName = "regexp"
			if imp.Name != nil {
				regexpName = imp.Name.Name
			}
		}
	}
	if regexpName == "" {
		return nil
	}
	var found []string
	visit := func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == regexpName && (sel.Sel.Name == "MustCompile" || sel.Sel.Name == "Compile" || sel.Sel.Name == "MustCompilePOSIX" || sel.Sel.Name == "CompilePOSIX") {
					found = append(found, fset.Position(n.Pos()).String())
				}
			}
		}
		return true
	}
	for _, d := range parsed.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			if d.Tok == token.VAR {
				ast.Inspect(d, visit)
			}
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "init" && d.Body != nil {
				ast.Inspect(d.Body, visit)
			}
		}
	}
	return found
}
