package policy

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"mcpbox/internal/config"
)

// compiler collects the problems of one Compile.
type compiler struct {
	file     string
	src      [][]byte // the source's lines, or nil
	problems []Problem
}

func (k *compiler) errorf(p config.Pos, format string, args ...any) {
	k.problems = append(k.problems, Problem{File: k.file, Line: p.Line, Col: p.Col, Msg: fmt.Sprintf(format, args...)})
}

func (k *compiler) server(s *config.Server) *serverPolicy {
	t := &s.Tools
	sp := &serverPolicy{
		path:        "servers." + s.Name + ".tools",
		allow:       k.globs(t.Allow, &t.Meta, "servers."+s.Name+".tools", "allow"),
		deny:        k.globs(t.Deny, &t.Meta, "servers."+s.Name+".tools", "deny"),
		approve:     k.globs(t.Approve, &t.Meta, "servers."+s.Name+".tools", "approve"),
		def:         t.Default,
		annotations: t.ApproveAnnotations,
	}
	if sp.def == "" {
		sp.def = config.ActionDeny
	}
	if rank(sp.def) == 2 && sp.def != config.ActionDeny {
		k.errorf(t.Meta.At("default"), "%s.default: invalid action %q", sp.path, sp.def)
	}
	if sp.annotations == nil {
		sp.annotations = []string{config.AnnotationDestructive, config.AnnotationOpenWorld}
	}
	for i := range t.Rules {
		sp.rules = append(sp.rules, k.rule(&t.Rules[i], fmt.Sprintf("%s.rules[%d]", sp.path, i)))
	}
	return sp
}

func (k *compiler) rule(r *config.Rule, rp string) rule {
	out := rule{tool: r.Tool, action: r.Action, name: rp, loc: rp}
	if p := r.Meta.Pos; p.Line > 0 {
		out.loc = fmt.Sprintf("%s (%s)", rp, posString(k.file, p))
	}
	if err := checkGlob(r.Tool); err != nil {
		k.errorf(r.Meta.At("tool"), "%s.tool: %v", rp, err)
	}
	if r.Action != config.ActionAllow && r.Action != config.ActionDeny && r.Action != config.ActionApprove {
		k.errorf(r.Meta.At("action"), "%s.action: invalid action %q", rp, r.Action)
	}
	if strings.TrimSpace(r.When) == "" {
		return out
	}
	prg, issues := compileWhen(r.When)
	for _, is := range issues {
		k.errorf(k.whenPos(r, is), "%s.when: %s", rp, is.Msg)
	}
	out.when = prg
	return out
}

// posString is "FILE:L:C" without the trailing colon.
func posString(file string, p config.Pos) string {
	if file == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", file, p.Line, p.Col)
}

func (k *compiler) client(cl *config.Client, i int) *clientPolicy {
	t := &cl.Tools
	cp := &clientPolicy{}
	if !cl.Meta.Has("tools") && t.Meta.Pos.Line == 0 && t.Allow == nil && t.Deny == nil && t.Approve == nil {
		return cp
	}
	cp.path = fmt.Sprintf("clients[%d].tools", i)
	cp.allow = k.globs(t.Allow, &t.Meta, cp.path, "allow")
	cp.deny = k.globs(t.Deny, &t.Meta, cp.path, "deny")
	cp.approve = k.globs(t.Approve, &t.Meta, cp.path, "approve")
	return cp
}

// globs checks the patterns of list key; a malformed deny pattern would
// otherwise silently match nothing.
func (k *compiler) globs(gs []string, m *config.Meta, p, key string) []string {
	for i, g := range gs {
		if err := checkGlob(g); err != nil {
			k.errorf(m.Elem(key, i), "%s.%s[%d]: %v", p, key, i, err)
		}
	}
	return gs
}

func checkGlob(g string) error {
	if g == "" {
		return fmt.Errorf("empty tool pattern")
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("invalid tool pattern %q", g)
	}
	return nil
}

// whenPos places a CEL issue in the file: at the character when the value
// is one line and the text before the issue can be found verbatim after
// the value's start (and its opening quote), else at the value's start.
func (k *compiler) whenPos(r *config.Rule, is celIssue) config.Pos {
	start := r.Meta.At("when")
	if start.Line == 0 || is.Line != 1 || strings.ContainsAny(r.When, "\r\n") {
		return start
	}
	prefix := []rune(r.When)
	if is.Col < 0 || is.Col > len(prefix) {
		return start
	}
	prefix = prefix[:is.Col]
	if k.src == nil {
		return config.Pos{Line: start.Line, Col: start.Col + is.Col}
	}
	if start.Line > len(k.src) {
		return start
	}
	line := []rune(string(k.src[start.Line-1]))
	at := start.Col - 1
	if at < len(line) && (line[at] == '"' || line[at] == '\'') {
		at++
	}
	if at+len(prefix) > len(line) || string(line[at:at+len(prefix)]) != string(prefix) {
		return start
	}
	return config.Pos{Line: start.Line, Col: at + 1 + is.Col}
}

func splitLines(src []byte) [][]byte {
	if src == nil {
		return nil
	}
	return bytes.Split(src, []byte("\n"))
}
