package config

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Warnings lists what a valid config allows but a reviewer should see:
// a server whose tools are all hidden by default deny, secret-looking
// values in plain env, one secret shared by several servers, and secrets
// beside broad egress, a pod that runs the agent from an image that
// likely lacks it, images pods run by tag, a gateway outside the cluster
// its pods' NetworkPolicy does not admit. They carry FILE:LINE:COL like errors; `mcpbox
// policy check` prints them and still succeeds, `mcpbox serve` prints them
// at startup.
func Warnings(c *Config) Errors {
	r := &collector{file: c.File}
	users := map[string][]string{} // secret reference -> servers
	tagged := map[string]bool{}    // image references and kubeconfigs warned of
	for _, s := range c.Servers {
		if s == nil {
			continue
		}
		warnNoTools(r, s)
		warnPlainEnv(r, s)
		for _, sec := range s.Secrets {
			from := sec.From
			if sec.IsAWS() {
				from = sec.Inject.AWS.AccessKeyID
			}
			users[from] = append(users[from], s.Name)
			if len(users[from]) == 2 {
				r.errorf(sec.Meta.Pos, "servers.%s.secrets.%s: %s is also given to server %s; give each server its own credential",
					s.Name, sec.Name, from, users[from][0])
			}
		}
		warnSecretsWithBroadEgress(r, s)
		warnInjectAnywhere(r, s)
		warnKubeAgent(r, c, s)
		warnKubeTags(r, c, s, tagged)
		warnKubeOutside(r, c, s, tagged)
		warnTemplateFixedOutput(r, s)
		warnNoOutput(r, s)
	}
	warnClientGlobs(r, c)
	if err := r.err(); err != nil {
		return err.(Errors)
	}
	return nil
}

// warnClientGlobs flags a client's tool glob whose server part (before
// the first "/") matches none of the config's servers: unlike a tool's
// name, every server is known here, so it is a typo or a server since
// renamed. An allow that matches nothing hides tools the client was
// meant to have; a deny that matches nothing denies nothing.
func warnClientGlobs(r *collector, c *Config) {
	var names []string
	for _, s := range c.Servers {
		if s != nil {
			names = append(names, s.Name)
		}
	}
	for i := range c.Clients {
		t := &c.Clients[i].Tools
		for _, l := range []struct {
			key   string
			globs []string
		}{{"allow", t.Allow}, {"deny", t.Deny}, {"approve", t.Approve}} {
			for j, g := range l.globs {
				server, _, ok := strings.Cut(g, "/")
				if !ok {
					r.errorf(t.Meta.Elem(l.key, j), "clients[%d].tools.%s[%d]: %q has no \"/\", so it matches no SERVER/TOOL; write SERVER/TOOL (e.g. */%s)", i, l.key, j, g, g)
					continue
				}
				if !slices.ContainsFunc(names, func(n string) bool { ok, _ := path.Match(server, n); return ok }) {
					r.errorf(t.Meta.Elem(l.key, j), "clients[%d].tools.%s[%d]: %q matches no server of this config (%s)", i, l.key, j, g, strings.Join(names, ", "))
				}
			}
		}
	}
}

// warnTemplateFixedOutput flags a template that seeds nothing: it fills
// the workspaces made per scope (output: {}), not a fixed output dir.
func warnTemplateFixedOutput(r *collector, s *Server) {
	fs := &s.Filesystem
	if fs.Template == "" || fs.Output == nil || fs.Output.Source == "" {
		return
	}
	r.errorf(fs.Meta.At("template"), "servers.%s.filesystem.template: seeds only the workspaces made per scope (output: {}); with output.source %s it is not used: copy its files there yourself, or drop output.source",
		s.Name, fs.Output.Source)
}

// warnNoTools flags a server that offers no tool to anyone: tools: absent
// (default deny) or a tools: that allows nothing. That is safe, but a
// user who forgot the key sees an empty tool list and no reason.
func warnNoTools(r *collector, s *Server) {
	if !s.Meta.Has("tools") {
		r.errorf(s.Meta.Pos, `servers.%s: no tools: key, so every tool is hidden (default deny); add  tools: {allow: ["*"]}  to expose them`, s.Name)
		return
	}
	t := &s.Tools
	for _, rule := range t.Rules {
		if rule.Action != ActionDeny {
			return // a rule may let a tool through, whatever the globs say
		}
	}
	if slices.Contains(t.Deny, "*") {
		// deny is read before approve, allow and the default.
		r.errorf(s.Meta.At("tools"), `servers.%s.tools: deny: ["*"] refuses every tool before allow, approve or the default is read, so every tool is hidden; name the tools to deny instead`, s.Name)
		return
	}
	if len(t.Allow) > 0 || len(t.Approve) > 0 || t.Default == ActionAllow || t.Default == ActionApprove {
		return
	}
	r.errorf(s.Meta.At("tools"), `servers.%s.tools: allows no tool (no allow, approve, allowing rule or default), so every tool is hidden; add  allow: ["*"]  or the tools to expose`, s.Name)
}

// credNameRE matches the names that usually hold credentials: TOKEN,
// KEY, SECRET, PASSWORD, PASSWD or CREDENTIAL anywhere, PAT (a personal
// access token) as a whole word, so that PATH and PATTERN do not count.
// KEY anywhere, not only API_KEY and the like: OPENAI_KEY, SSH_KEY and
// SIGNING_KEY are credentials, and a name such as KEYBOARD_LAYOUT drawing
// a needless warning costs less than a missed key.
var credNameRE = lazyRegexp(`(?i)TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|(?:^|[_-])PAT(?:$|[_-])`)

// CredentialName reports whether name (an environment variable, a URL
// query parameter or a command-line flag) usually holds a credential.
// Warnings flags such env values in plain config; the importer turns
// them into secrets (and such query parameters into query).
func CredentialName(name string) bool { return credNameRE().MatchString(name) }

// credValueRE matches values that carry a credential whatever their
// name: an authorization scheme and its token (also inside a JSON header
// map), a password in a connection string, a URL's password or a user
// name of 16 or more characters (a DSN's key, a git token; not
// ssh://git@ or postgres://postgres@), and token formats with a prefix
// of their own (Notion, Hugging Face, sk- keys).
var credValueRE = lazyRegexp(`(?i)\b(?:bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{16,}` +
	`|(?:^|[;&?\s])(?:password|passwd|pwd)\s*=\s*[^;&\s]` +
	`|^[a-z][a-z0-9+.-]*://(?:[^/@\s:]{16,}|[^/@\s:]*:[^/@\s]+)@` +
	`|\b(?:ntn|secret|hf)_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{20,}`)

// CredentialValue reports whether v looks like it holds a credential,
// by its shape (see credValueRE), whatever its variable is called.
func CredentialValue(v string) bool { return credValueRE().MatchString(v) }

// EncodedCredentials returns the credentials inside v when v is JSON, or
// base64 of JSON (Smithery's config= parameter): the values of keys
// named like a credential (strings, and numbers as written), and the
// strings that CredentialValue or shaped (nil: none) says are one, in
// JSON held in a string too, to depth 16. Nil when v is neither or holds
// none.
func EncodedCredentials(v string, shaped func(string) bool) []string {
	var doc any
	if decodeNumbers([]byte(v), &doc) != nil {
		v = strings.ReplaceAll(v, " ", "+") // a '+' the query decoding turned into a space
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(v); err == nil && decodeNumbers(b, &doc) == nil {
				break
			}
		}
	}
	var out []string
	var walk func(v any, named bool, depth int)
	walk = func(v any, named bool, depth int) {
		if depth > 16 {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(e, CredentialName(k), depth+1)
			}
		case []any:
			for _, e := range v {
				walk(e, named, depth+1)
			}
		case json.Number:
			if named {
				out = append(out, v.String())
			}
		case string:
			var inner any
			switch {
			case v == "":
			case named || CredentialValue(v) || (shaped != nil && shaped(v)):
				out = append(out, v)
			case (v[0] == '{' || v[0] == '[') && decodeNumbers([]byte(v), &inner) == nil:
				walk(inner, false, depth+1)
			}
		}
	}
	switch doc.(type) {
	case map[string]any, []any:
		walk(doc, false, 0)
	}
	return out
}

// decodeNumbers decodes one JSON value into v, numbers as json.Number
// (a numeric key keeps every digit).
func decodeNumbers(b []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

func warnPlainEnv(r *collector, s *Server) {
	for _, e := range s.Env {
		if (CredentialName(e.Name) || CredentialValue(e.Value)) && e.Value != "" {
			r.errorf(e.Pos, "servers.%s.env.%s: looks like a credential in plain config; use secrets: {%s: {from: env:VAR | file:PATH | cmd:COMMAND}}",
				s.Name, e.Name, e.Name)
		}
	}
}

// warnNoOutput flags a local server that names /workspace/output in its
// env, command or args but has no filesystem.output: there is no such
// dir in its sandbox, and the server meets ENOENT with no word from serve.
func warnNoOutput(r *collector, s *Server) {
	if s.URL != "" || s.Builtin != "" || s.Filesystem.Output != nil {
		return
	}
	const out = "/workspace/output"
	names := func(v string) bool {
		if _, after, ok := strings.Cut(v, "="); ok {
			v = after // --out=/workspace/output
		}
		return v == out || strings.HasPrefix(v, out+"/")
	}
	why := "names " + out + ", which its sandbox has only with filesystem.output; add  filesystem: {output: {}}"
	for _, e := range s.Env {
		if names(e.Value) {
			r.errorf(e.Pos, "servers.%s.env.%s: %s", s.Name, e.Name, why)
		}
	}
	for _, list := range []struct {
		key  string
		vals []string
	}{{"command", s.Command}, {"args", s.Args}} {
		for i, v := range list.vals {
			if names(v) {
				r.errorf(s.Meta.Elem(list.key, i), "servers.%s.%s[%d]: %s", s.Name, list.key, i, why)
			}
		}
	}
}

// warnInjectAnywhere flags inject.body and inject.any_header: the real
// value then goes wherever the server puts the placeholder in a request
// to the secret's hosts, and a host that stores what it is sent (a gist,
// an issue comment) can hand it back through a host the proxy does not
// intercept.
func warnInjectAnywhere(r *collector, s *Server) {
	for _, sec := range s.Secrets {
		in := sec.Inject
		if in == nil || !in.Body && !in.AnyHeader {
			continue
		}
		where := "request bodies"
		if !in.Body {
			where = "any request header"
		} else if in.AnyHeader {
			where = "request bodies and any request header"
		}
		r.errorf(in.Meta.Pos, "servers.%s.secrets.%s.inject: the real value goes into %s to %s: a server can make such a host store it (e.g. in a posted text) and read it back elsewhere; prefer header, query or basic",
			s.Name, sec.Name, where, strings.Join(in.Hosts, ", "))
	}
}

func warnSecretsWithBroadEgress(r *collector, s *Server) {
	// A secret added at the proxy (inject) is not in the sandbox.
	held := slices.ContainsFunc(s.Secrets, func(sec Secret) bool { return sec.Inject == nil })
	if !held {
		return
	}
	for i := range s.Network.Egress {
		e := &s.Network.Egress[i]
		broad := e.Host == "*" || e.Host == "" && e.CIDR != ""
		if !broad && strings.HasPrefix(e.Host, "*.") && strings.Count(e.Host, ".") < 2 {
			broad = true // "*.com": a whole top-level domain
		}
		if broad {
			r.errorf(e.Meta.Pos, "servers.%s.network.egress[%d]: %s; the server holds secrets it could send there",
				s.Name, i, describeBroad(e))
		}
	}
}

func describeBroad(e *Egress) string {
	switch {
	case e.Host == "*":
		return "allows any host"
	case e.Host == "":
		return fmt.Sprintf("allows every address in %s", e.CIDR)
	default:
		return fmt.Sprintf("allows every name below %s", strings.TrimPrefix(e.Host, "*."))
	}
}

// warnKubeAgent flags a server on kubernetes whose pod runs the agent
// from its own image at the default path: no stock image has mcpbox
// there, so the pod would fail at start. An explicit agent_path says
// the user built the image with it.
func warnKubeAgent(r *collector, c *Config, s *Server) {
	b := c.BackendOf(s)
	if b.Kind != BackendKubernetes || s.URL != "" || s.Builtin != "" || b.AgentImage != "" || b.AgentPath != "" {
		return
	}
	r.errorf(s.Meta.Pos, "servers.%s: its pod runs the agent from its image at %s, which no stock image has; set backend.agent_image (an image with mcpbox) to copy the agent in, or backend.agent_path if the image has it",
		s.Name, DefaultAgentPath)
}

// warnKubeTags flags the images a server's pods run by tag rather than
// digest (agent_image, image, base_images, an image server's own): the
// node pulls the tag, whatever it names at that moment, so a pushed tag
// changes the pods (the agent among them, which holds the server's
// secrets) with no mcpbox.lock to notice, as it would on this host. Each
// reference once; the default base image is the user's to pin and
// too common to flag.
func warnKubeTags(r *collector, c *Config, s *Server, warned map[string]bool) {
	b := c.BackendOf(s)
	if b.Kind != BackendKubernetes || s.URL != "" || s.Builtin != "" {
		return
	}
	at := func(key string) Pos {
		if s.Backend != nil && s.Backend.Meta.Has(key) {
			return s.Backend.Meta.At(key)
		}
		return c.Backend.Meta.At(key)
	}
	type ref struct {
		key, ref string
		pos      Pos
	}
	refs := []ref{{"backend.agent_image", b.AgentImage, at("agent_image")}}
	switch {
	case s.Image.Ref != "":
		refs = append(refs, ref{"servers." + s.Name + ".image", s.Image.Ref, s.Meta.At("image")})
	case s.Package != "":
		for _, e := range b.BaseImages {
			if strings.HasPrefix(s.Package, e.Name+":") {
				refs = append(refs, ref{"backend.base_images." + e.Name, e.Value, at("base_images")})
			}
		}
	default:
		refs = append(refs, ref{"backend.image", b.Image, at("image")})
	}
	for _, x := range refs {
		if x.ref == "" || strings.Contains(x.ref, "@sha256:") || warned[x.ref] {
			continue
		}
		warned[x.ref] = true
		r.errorf(x.pos, "%s %s is a tag: the pods run whatever it names when a node pulls it (mcpbox.lock does not pin a pod's images); pin it by digest (%s@sha256:...)",
			x.key, x.ref, x.ref)
	}
}

// warnKubeOutside flags a backend that reaches the cluster from outside
// (a kubeconfig) with no gateway_cidrs: the servers' NetworkPolicy then
// admits only pods labelled as the gateway, so where policies are
// enforced this gateway cannot reach its pods, and each start times out.
func warnKubeOutside(r *collector, c *Config, s *Server, warned map[string]bool) {
	b := c.BackendOf(s)
	if b.Kind != BackendKubernetes || s.URL != "" || b.InCluster || b.Kubeconfig == "" || len(b.GatewayCIDRs) > 0 {
		return
	}
	key := "kubeconfig " + b.Kubeconfig + " " + b.Namespace
	if warned[key] {
		return
	}
	warned[key] = true
	pos := c.Backend.Meta.At("kubeconfig")
	if s.Backend != nil && s.Backend.Meta.Has("kubeconfig") {
		pos = s.Backend.Meta.At("kubeconfig")
	}
	r.errorf(pos, "backend: a gateway outside the cluster (kubeconfig) needs backend.gateway_cidrs, the addresses it connects from: the servers' NetworkPolicy admits only pods labelled mcpbox.dev/role=gateway, so where policies are enforced it cannot reach its pods (in the cluster, label the gateway's pod and use in_cluster: true)")
}
