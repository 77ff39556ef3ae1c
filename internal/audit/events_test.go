package audit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEventsComplete: Events holds every Event constant of the package,
// so that mcpbox logs --event accepts each event a record can have.
func TestEventsComplete(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Event") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					seen++
					if !slices.Contains(Events, v) {
						t.Errorf("%s (%q) is missing from Events", id.Name, v)
					}
				}
			}
		}
	}
	if seen != len(Events) {
		t.Errorf("the package declares %d Event constants, Events lists %d", seen, len(Events))
	}
}
