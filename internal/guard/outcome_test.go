package guard

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"mcpbox/internal/audit"
)

// TestOutcomesKnown: every outcome the guard writes into a record is one
// of audit.Outcomes. The guard's sources may set Record.Outcome only to an
// audit.Outcome* constant or to outcomeOf(...), which returns only such
// constants; each constant named must be in the list.
func TestOutcomesKnown(t *testing.T) {
	values := outcomeConsts(t)
	fset := token.NewFileSet()
	files, _ := filepath.Glob("*.go")
	var named []string
	check := func(pos token.Pos, e ast.Expr, what string) {
		switch e := e.(type) {
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && x.Name == "audit" && strings.HasPrefix(e.Sel.Name, "Outcome") {
				named = append(named, e.Sel.Name)
				return
			}
		case *ast.CallExpr:
			if f, ok := e.Fun.(*ast.Ident); ok && f.Name == "outcomeOf" && what == "assignment" {
				return
			}
		}
		t.Errorf("%s: %s of an outcome that is not an audit.Outcome* constant", fset.Position(pos), what)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if sel, ok := l.(*ast.SelectorExpr); ok && sel.Sel.Name == "Outcome" && i < len(n.Rhs) {
						check(n.Pos(), n.Rhs[i], "assignment")
					}
				}
			case *ast.FuncDecl:
				if n.Name.Name != "outcomeOf" {
					return true
				}
				ast.Inspect(n.Body, func(m ast.Node) bool {
					if r, ok := m.(*ast.ReturnStmt); ok {
						for _, e := range r.Results {
							check(r.Pos(), e, "return")
						}
					}
					return true
				})
			}
			return true
		})
	}
	if len(named) == 0 {
		t.Fatal("found no outcome the guard writes")
	}
	for _, n := range named {
		if v, ok := values[n]; !ok || !slices.Contains(audit.Outcomes, v) {
			t.Errorf("the guard writes audit.%s (%q), which audit.Outcomes lacks", n, v)
		}
	}
	if !slices.Contains(named, "OutcomeBlocked") {
		t.Errorf("the guard writes %q, but not audit.OutcomeBlocked", named)
	}
}

// outcomeConsts maps the names of audit's Outcome* constants to their
// values.
func outcomeConsts(t *testing.T) map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "audit", "record.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && len(vs.Values) == 1 {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				out[vs.Names[0].Name], _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	return out
}
