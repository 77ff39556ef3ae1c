package audit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOutcomesListed: every Outcome* constant of record.go is in
// Outcomes, once.
func TestOutcomesListed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "record.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Outcome") || len(vs.Values) != 1 {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			v, _ := strconv.Unquote(lit.Value)
			consts = append(consts, v)
		}
		return true
	})
	if len(consts) == 0 {
		t.Fatal("no Outcome constants found in record.go")
	}
	for _, c := range consts {
		if n := strings.Count(","+strings.Join(Outcomes, ",")+",", ","+c+","); n != 1 {
			t.Errorf("outcome %q is in Outcomes %d times, want once", c, n)
		}
	}
	if len(Outcomes) != len(consts) || !slices.Contains(Outcomes, OutcomeBlocked) {
		t.Errorf("Outcomes %q, constants %q", Outcomes, consts)
	}
}
