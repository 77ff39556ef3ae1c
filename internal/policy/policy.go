package policy

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/gateway"
)

// Input is one tool call to decide.
type Input struct {
	Client, Server, Tool string         // Tool is the server's own tool name
	Args                 map[string]any // the call's decoded arguments (nil ok)
	Annotations          map[string]any // the tool's annotations from its current definition (nil ok)
}

// Decision is the outcome of a call's policy.
type Decision struct {
	Action string // config.ActionAllow, config.ActionApprove or config.ActionDeny
	Rule   string // what decided, e.g. "servers.github.tools.rules[0] (mcpbox.yaml:14:9)"
	Reason string // why, in a few words; never an argument value
	// Conditional reports that a rule with a when: decided: a decision
	// remembered for the tool (approve --always) would pass over its
	// condition.
	Conditional bool
}

// Options adjust Compile.
type Options struct {
	// Source, if non-nil, is the YAML text the config was parsed from. It
	// is only read to place CEL errors inside a quoted when value; nil:
	// when values are taken to be plain (unquoted) scalars.
	Source []byte
}

// Engine decides calls for one config. It is immutable after Compile and
// safe for concurrent use.
type Engine struct {
	servers map[string]*serverPolicy
	clients map[string]*clientPolicy
	listed  bool // the config has a clients list: unknown names are denied
}

type serverPolicy struct {
	path                 string // "servers.NAME.tools"
	rules                []rule
	allow, deny, approve []string
	def                  string
	annotations          []string // the effective approve_annotations
}

type rule struct {
	tool, action string
	when         *whenProgram // nil: always
	name         string       // "servers.NAME.tools.rules[I]", for reasons a client may read
	loc          string       // name and " (FILE:L:C)", for Rule (the audit, the operator)
}

type clientPolicy struct {
	path                 string // "clients[I].tools"; "" when the client has no tools key
	allow, deny, approve []string
}

// Compile checks and compiles every rule of c. The error, an *Errors,
// lists every problem.
func Compile(c *config.Config) (*Engine, error) { return CompileWith(c, Options{}) }

// CompileWith is Compile with options.
func CompileWith(c *config.Config, opts Options) (*Engine, error) {
	k := &compiler{file: c.File, src: splitLines(opts.Source)}
	e := &Engine{
		servers: make(map[string]*serverPolicy),
		clients: make(map[string]*clientPolicy),
		listed:  c.Clients != nil,
	}
	for _, s := range c.Servers {
		if s != nil && e.servers[s.Name] == nil {
			e.servers[s.Name] = k.server(s)
		}
	}
	for i := range c.Clients {
		cl := &c.Clients[i]
		if e.clients[cl.Name] == nil {
			e.clients[cl.Name] = k.client(cl, i)
		}
	}
	if len(k.problems) > 0 {
		return nil, &Errors{Problems: k.problems}
	}
	return e, nil
}

// Decide returns the action for in.
func (e *Engine) Decide(in Input) Decision {
	sp := e.servers[in.Server]
	if sp == nil {
		return Decision{Action: config.ActionDeny, Rule: "servers", Reason: ErrUnknownServer.Error()}
	}
	cp, ok := e.client(in.Client)
	if !ok {
		return Decision{Action: config.ActionDeny, Rule: "clients", Reason: ErrUnknownClient.Error()}
	}
	d := sp.decide(&in)
	if cd, ok := cp.decide(in.Server + "/" + in.Tool); ok && rank(cd.Action) > rank(d.Action) {
		return cd
	}
	return d
}

// Visible reports whether tool of server could be allowed or approved for
// client at all; see the package doc.
func (e *Engine) Visible(client, server, tool string) bool {
	sp := e.servers[server]
	cp, ok := e.client(client)
	if sp == nil || !ok {
		return false
	}
	if cd, ok := cp.decide(server + "/" + tool); ok && cd.Action == config.ActionDeny {
		return false
	}
	for _, r := range sp.rules {
		if !matchTool(r.tool, tool) {
			continue
		}
		if r.action != config.ActionDeny {
			return true
		}
		if r.when == nil {
			return false
		}
	}
	return sp.globs(tool).Action != config.ActionDeny
}

// Unmatched returns the keys and globs of server's tools.allow,
// tools.approve and rules that allow or approve, that match none of
// tools (the server's tool names): "servers.NAME.tools.allow:
// \"raed_*\"". Such a glob is most likely a typo, which hides a tool
// meant to be given. Deny globs and deny rules are left out: written
// ahead for tools a server may add ("*delete*"), they are meant to match
// nothing yet.
func (e *Engine) Unmatched(server string, tools []string) []string {
	sp := e.servers[server]
	if sp == nil {
		return nil
	}
	none := func(glob string) bool {
		return !slices.ContainsFunc(tools, func(t string) bool { return matchTool(glob, t) })
	}
	var out []string
	for _, l := range []struct {
		key   string
		globs []string
	}{{"allow", sp.allow}, {"approve", sp.approve}} {
		for _, g := range l.globs {
			if none(g) {
				out = append(out, fmt.Sprintf("%s.%s: %q", sp.path, l.key, g))
			}
		}
	}
	for _, r := range sp.rules {
		if r.action != config.ActionDeny && none(r.tool) {
			out = append(out, fmt.Sprintf("%s: tool %q", r.name, r.tool))
		}
	}
	return out
}

// RuleName is a Decision's Rule without the config file position a rule
// has ("servers.fs.tools.rules[0] (/home/me/mcpbox.yaml:12:9)"), for a
// message to a client, which has no business with the operator's paths.
func RuleName(rule string) string {
	name, _, _ := strings.Cut(rule, " (")
	return name
}

// client returns the client's policy (nil: none) and false for a name the
// config does not list. A name with a '.' is an identity an OAuth issuer
// vouched for (oidc.NAME, listen.http.oauth; no clients: name has one):
// it is known, with no client policy of its own.
func (e *Engine) client(name string) (*clientPolicy, bool) {
	if name == "" {
		return nil, true
	}
	cp := e.clients[name]
	return cp, cp != nil || !e.listed || strings.Contains(name, ".")
}

func (sp *serverPolicy) decide(in *Input) Decision {
	d, byAllowRule := sp.rulesDecide(in)
	if d.Action == "" {
		skipped := d.Reason
		d = sp.globs(in.Tool)
		d.Reason += skipped
	}
	if d.Action == config.ActionAllow && !byAllowRule {
		if a, unset := sp.reviewAnnotation(in.Annotations); a != "" {
			rule, why := "annotation "+a, "the tool sets "+a
			switch unset {
			case unsetAbsent:
				rule, why = rule+" (not set, so true)", "the tool does not set "+a+", which MCP then takes as true"
			case unsetNotBool:
				rule, why = rule+" (not a boolean, so true)", "the tool gives "+a+" a value that is not a boolean, which counts as not set: true"
			}
			d = Decision{Action: config.ActionApprove, Rule: rule,
				Reason: fmt.Sprintf("%s; review required (%s)", why, d.Rule)}
		}
	}
	return d
}

// rulesDecide runs the rules; Action is "" when none matched. The bool
// reports a match of an allow rule, which annotations do not override.
func (sp *serverPolicy) rulesDecide(in *Input) (Decision, bool) {
	var (
		act     *activation
		ctx     context.Context
		skipped string
		unmet   string // the first rule whose when was false
	)
	for _, r := range sp.rules {
		if !matchTool(r.tool, in.Tool) {
			continue
		}
		if r.when == nil {
			return Decision{Action: r.action, Rule: r.loc, Reason: "rule matched" + skipped}, r.action == config.ActionAllow
		}
		if act == nil {
			act = newActivation(in)
		}
		if ctx == nil && r.when.loops {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.Background(), EvalBudget)
			defer cancel()
		}
		ok, err := r.when.eval(ctx, act)
		switch {
		case err != nil && r.action != config.ActionAllow:
			// A deny or approve rule that cannot be evaluated still
			// applies: a failure never loses a denial or a review.
			return Decision{Action: r.action, Rule: r.loc, Conditional: true,
				Reason: fmt.Sprintf("when failed (%v); %s rule applied (fail closed)%s", err, r.action, skipped)}, false
		case err != nil:
			if skipped == "" {
				skipped = fmt.Sprintf("; skipped %s: when failed (%v)", r.name, err)
			}
		case ok:
			return Decision{Action: r.action, Rule: r.loc, Reason: "rule matched" + skipped, Conditional: true}, r.action == config.ActionAllow
		case unmet == "":
			unmet = r.name
		}
	}
	if unmet != "" {
		// A caller refused by the default wants to know that a rule for
		// the tool exists and what kept it from applying.
		skipped += "; the when of " + unmet + " does not hold for these arguments"
	}
	return Decision{Reason: skipped}, false
}

// globs decides by the deny, approve and allow globs and the default.
func (sp *serverPolicy) globs(tool string) Decision {
	for _, l := range []struct {
		action string
		globs  []string
	}{{config.ActionDeny, sp.deny}, {config.ActionApprove, sp.approve}, {config.ActionAllow, sp.allow}} {
		if g, ok := matchAny(l.globs, tool, matchTool); ok {
			return Decision{Action: l.action, Rule: sp.path + "." + l.action,
				Reason: fmt.Sprintf("the tool matches %q", g)}
		}
	}
	return Decision{Action: sp.def, Rule: sp.path + ".default", Reason: "no rule or glob matched"}
}

// Unannotated returns the tools of server, each given with its
// annotations (nil: none), whose calls a glob or the default allows and
// that approve_annotations holds for review only because they leave an
// annotation out (MCP's default for it is true), and the annotations it
// lists. Servers written before annotations (server-github) have every
// tool held so; serve names them, so that an operator who meets the held
// calls learns why and how to let the harmless ones run. A tool a rule
// names, or a glob denies or approves, was thought of: left out.
func (e *Engine) Unannotated(server string, tools map[string]map[string]any) (names, annotations []string) {
	sp := e.servers[server]
	if sp == nil {
		return nil, nil
	}
	for name, ann := range tools {
		if sp.globs(name).Action != config.ActionAllow ||
			slices.ContainsFunc(sp.rules, func(r rule) bool { return matchTool(r.tool, name) }) {
			continue
		}
		if a, unset := sp.reviewAnnotation(ann); a != "" && unset != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, slices.Clone(sp.annotations)
}

// How a tool leaves an annotation unset (reviewAnnotation).
const (
	unsetAbsent  = "absent"
	unsetNotBool = "not a boolean"
)

// reviewAnnotation returns the first annotation of approve_annotations
// that holds a call of a tool with these annotations for review
// (Annotation), and "" if the tool sets it to true, or how it leaves it
// unset. A set true wins over one left unset.
func (sp *serverPolicy) reviewAnnotation(ann map[string]any) (name, unset string) {
	for _, a := range sp.annotations {
		v, u := Annotation(ann, a)
		switch {
		case v && u == "":
			return a, ""
		case v && name == "":
			name, unset = a, u
		}
	}
	return name, unset
}

// Annotation is what a tool with the annotations ann says of the hint
// name (destructiveHint or openWorldHint) as MCP reads it, and, when the
// tool leaves it unset, how. MCP's defaults are both hints true unless
// the tool says otherwise, so only a boolean false makes one false; a
// value of another type is no statement. As MCP says, destructiveHint
// means nothing for a tool that sets readOnlyHint true: left out, it is
// false for such a tool (set true, it is true); openWorldHint holds
// whatever readOnlyHint says, since a read can reach out. The audit's
// call category reads the hints through this too.
func Annotation(ann map[string]any, name string) (value bool, unset string) {
	v, present := ann[name]
	b, isBool := v.(bool)
	readOnly, _ := ann["readOnlyHint"].(bool)
	switch {
	case isBool:
		return b, ""
	case readOnly && name == config.AnnotationDestructive:
		return false, ""
	case present:
		return true, unsetNotBool
	}
	return true, unsetAbsent
}

// decide applies the client's globs to "SERVER/TOOL"; false: no client policy.
func (cp *clientPolicy) decide(name string) (Decision, bool) {
	if cp == nil || cp.path == "" {
		return Decision{}, false
	}
	for _, l := range []struct {
		action string
		globs  []string
	}{{config.ActionDeny, cp.deny}, {config.ActionApprove, cp.approve}, {config.ActionAllow, cp.allow}} {
		if g, ok := matchAny(l.globs, name, matchClient); ok {
			return Decision{Action: l.action, Rule: cp.path + "." + l.action,
				Reason: fmt.Sprintf("client policy: %q matches %q", name, g)}, true
		}
	}
	return Decision{Action: config.ActionDeny, Rule: cp.path,
		Reason: fmt.Sprintf("client policy: %q matches no allow or approve glob", name)}, true
}

// rank orders actions by strictness; anything unknown is the strictest.
func rank(action string) int {
	switch action {
	case config.ActionAllow:
		return 0
	case config.ActionApprove:
		return 1
	}
	return 2
}

// match is path.Match; Compile rejected malformed patterns.
func match(glob, name string) bool {
	ok, err := path.Match(glob, name)
	return ok && err == nil
}

// matchClient is the match of a client's glob over "SERVER/TOOL": the
// part before the first "/" matches the server's name, the rest the
// tool's (matchTool: "github/*" is every tool of github, "files/read"
// too).
func matchClient(glob, name string) bool {
	gs, gt, ok := strings.Cut(glob, "/")
	if !ok {
		return match(glob, name)
	}
	server, tool, _ := strings.Cut(name, "/")
	return match(gs, server) && matchTool(gt, tool)
}

// matchTool is the match of a tool-name glob: "/" is an ordinary
// character of a tool's name (gateway.MatchTool).
func matchTool(glob, tool string) bool { return gateway.MatchTool(glob, tool) }

func matchAny(globs []string, name string, match func(glob, name string) bool) (string, bool) {
	i := slices.IndexFunc(globs, func(g string) bool { return match(g, name) })
	if i < 0 {
		return "", false
	}
	return globs[i], true
}
