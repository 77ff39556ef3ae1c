package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

// CostLimit is the runtime cost (CEL's units: about one per operation or
// element, one tenth per byte of a string scanned) a single when condition
// may spend. Ordinary conditions cost well under 100; scanning a 10 MB
// string fits; a nested comprehension over a long list does not.
const CostLimit = 1_000_000

// EvalBudget is the wall-clock time all conditions of one decision may take
// together; comprehensions check it every interruptEvery iterations. It is
// what stops a comprehension that stays under CostLimit but is slow (the
// cost of building lists inside comprehensions is underestimated).
const EvalBudget = 20 * time.Millisecond

const interruptEvery = 100

var (
	envOnce sync.Once
	envVal  *cel.Env
	envErr  error
)

// celEnv is shared: an Env is safe for concurrent use once built.
func celEnv() (*cel.Env, error) {
	envOnce.Do(func() {
		envVal, envErr = cel.NewEnv(
			cel.Variable("tool", cel.StringType),
			cel.Variable("server", cel.StringType),
			cel.Variable("client", cel.StringType),
			cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("annotations", cel.MapType(cel.StringType, cel.DynType)),
			ext.Strings(),
		)
	})
	return envVal, envErr
}

// celIssue is one compile problem, Line 1-based and Col 0-based within the
// expression text; Line 0 means no position.
type celIssue struct {
	Line, Col int
	Msg       string
}

// whenProgram is a compiled condition. Only a condition with a
// comprehension (all, exists, map, filter, ...) can run for long: without
// one, the work is linear in the size of the expression times the size of
// the call. Cost tracking and interrupt checks cost several times the
// evaluation itself, so only such conditions get them.
type whenProgram struct {
	prg   cel.Program
	loops bool
}

// compileWhen type-checks expr and builds its program.
func compileWhen(expr string) (*whenProgram, []celIssue) {
	env, err := celEnv()
	if err != nil {
		return nil, []celIssue{{Msg: fmt.Sprintf("building the CEL environment: %v", err)}}
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		var out []celIssue
		for _, e := range iss.Errors() {
			out = append(out, celIssue{Line: e.Location.Line(), Col: e.Location.Column(), Msg: e.Message})
		}
		return nil, out
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) {
		msg := fmt.Sprintf("must be a bool expression, got %s", t)
		if t.IsExactType(types.DynType) {
			msg += " (compare it, e.g. args.flag == true)"
		}
		return nil, []celIssue{{Msg: msg}}
	}
	w := &whenProgram{loops: hasComprehension(ast)}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if w.loops {
		opts = append(opts, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(interruptEvery))
	}
	prg, err := env.Program(ast, opts...)
	if err != nil {
		return nil, []celIssue{{Msg: fmt.Sprintf("building the program: %v", err)}}
	}
	w.prg = prg
	return w, nil
}

func hasComprehension(a *cel.Ast) bool {
	root := celast.NavigateAST(a.NativeRep())
	return len(celast.MatchDescendants(root, celast.KindMatcher(celast.ComprehensionKind))) > 0
}

// activation holds one call's variables; it is built once per decision.
type activation struct {
	tool, server, client ref.Val
	args, annotations    ref.Val
}

func newActivation(in *Input) *activation {
	return &activation{
		tool:        types.String(in.Tool),
		server:      types.String(in.Server),
		client:      types.String(in.Client),
		args:        jsonMap(in.Args),
		annotations: jsonMap(in.Annotations),
	}
}

func jsonMap(m map[string]any) ref.Val {
	if m == nil {
		m = map[string]any{}
	} else if hasNumber(m) {
		m = normalize(m).(map[string]any)
	}
	return types.DefaultTypeAdapter.NativeToValue(m)
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "tool":
		return a.tool, true
	case "server":
		return a.server, true
	case "client":
		return a.client, true
	case "args":
		return a.args, true
	case "annotations":
		return a.annotations, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() cel.Activation { return nil }

// hasNumber reports whether v holds a json.Number, which CEL cannot use;
// most calls have none, and then args are passed without a copy.
func hasNumber(v any) bool {
	switch v := v.(type) {
	case json.Number:
		return true
	case map[string]any:
		for _, e := range v {
			if hasNumber(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasNumber(e) {
				return true
			}
		}
	}
	return false
}

// normalize copies v with every json.Number turned into a float64, as
// encoding/json would have decoded it without UseNumber. A number that
// does not parse (it cannot come from a JSON decoder) becomes its string.
func normalize(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return v.String()
		}
		return f
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}

// eval runs the condition; the result is true, false, or an error whose
// text is safe to show (it never quotes an argument). ctx bounds the time
// of a condition with loops; the others ignore it.
func (w *whenProgram) eval(ctx context.Context, act *activation) (bool, error) {
	var (
		out ref.Val
		err error
	)
	if w.loops {
		out, _, err = w.prg.ContextEval(ctx, act)
	} else {
		out, _, err = w.prg.Eval(act)
	}
	if err != nil {
		return false, errors.New(evalFailure(ctx, err))
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, errors.New("did not give a bool")
	}
	return bool(b), nil
}

// evalFailure names the kind of a CEL evaluation error. CEL messages can
// quote runtime values (a map key taken from an argument, a string that
// failed to convert), so only the kind is kept.
func evalFailure(ctx context.Context, err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "cost limit"):
		return "cost limit exceeded"
	case ctx != nil && ctx.Err() != nil, strings.Contains(msg, "interrupt"):
		return "time budget exceeded"
	case strings.Contains(msg, "no such key"), strings.Contains(msg, "no such attribute"):
		return "missing key"
	case strings.Contains(msg, "no such overload"), strings.Contains(msg, "no matching overload"):
		return "type mismatch"
	case strings.Contains(msg, "division by zero"), strings.Contains(msg, "modulus by zero"):
		return "division by zero"
	case strings.Contains(msg, "index out of range"), strings.Contains(msg, "invalid_argument"):
		return "index out of range"
	case strings.Contains(msg, "overflow"):
		return "overflow"
	}
	return "evaluation error"
}
