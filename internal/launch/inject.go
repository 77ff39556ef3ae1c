package launch

import (
	"context"
	"fmt"
	"log/slog"

	"mcpbox/internal/config"
	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/gateway"
	"mcpbox/internal/redact"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/track"
)

// ProxySecret is a secret added at the egress proxy (config
// secrets.NAME.inject), resolved: its value goes to the proxy, the
// sandbox gets a placeholder.
type ProxySecret struct {
	Cred   credinject.Credential
	AsFile bool
}

// ResolveProxySecret resolves sec, a secret with Inject, with ctx (an aws
// secret's references one by one).
func ResolveProxySecret(ctx context.Context, sec config.Secret) (ProxySecret, error) {
	in := sec.Inject
	ps := ProxySecret{AsFile: sec.As == config.SecretAsFile, Cred: credinject.Credential{
		Name: sec.Name, Hosts: in.Hosts, Header: in.Header, Format: in.Format, Query: in.Query,
		Basic: in.Basic, AnyHeader: in.AnyHeader, Body: in.Body, Shape: in.Shape,
	}}
	resolve := func(what, ref string) (string, error) {
		if ref == "" {
			return "", nil
		}
		v, err := ResolveSecret(ctx, sec.Name, ref, false)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		return string(v.Value), nil
	}
	var err error
	if a := in.AWS; a != nil {
		aws := &credinject.AWS{PassThrough: a.PassThrough}
		if aws.AccessKeyID, err = resolve("access_key_id", a.AccessKeyID); err != nil {
			return ps, err
		}
		if aws.SecretAccessKey, err = resolve("secret_access_key", a.SecretAccessKey); err != nil {
			return ps, err
		}
		if aws.SessionToken, err = resolve("session_token", a.SessionToken); err != nil {
			return ps, err
		}
		ps.Cred.AWS = aws
		return ps, nil
	}
	ps.Cred.Value, err = resolve("from", sec.From)
	return ps, err
}

// Learn teaches book the real values of ps (redacted as NAME; an aws
// pair's key id, secret key and session token as NAME too).
func (ps ProxySecret) Learn(book *redact.Book) error {
	vals := []string{ps.Cred.Value}
	if a := ps.Cred.AWS; a != nil {
		vals = []string{a.AccessKeyID, a.SecretAccessKey, a.SessionToken}
	}
	for _, v := range vals {
		if v == "" {
			continue
		}
		if err := book.Add(ps.Cred.Name, []byte(v)); err != nil {
			return fmt.Errorf("secret %s: %w", ps.Cred.Name, err)
		}
	}
	return nil
}

// AWS variables the sandbox gets for an aws secret (its fake pair).
const (
	awsKeyVar     = "AWS_ACCESS_KEY_ID"
	awsSecretVar  = "AWS_SECRET_ACCESS_KEY"
	awsSessionVar = "AWS_SESSION_TOKEN"
)

// ApplyProxySecrets prepares spec for the secrets ps added at its egress
// proxy: one credinject.Set for this sandbox (sandboxID names it in
// events; "" gives spec a fresh sandbox.NewID), its placeholders in
// spec.Secrets in place of the values, the Set and ca on spec.Network
// and the sandbox's trust in ca (the bundle, the TLS variables). ca nil
// makes a CA of this sandbox's own. events receives every substitution
// and refusal. Nothing happens without ps.
func ApplyProxySecrets(spec *sandbox.Spec, ps []ProxySecret, sandboxID string, ca *egress.CA, events func(credinject.Event)) error {
	if len(ps) == 0 {
		return nil
	}
	if sandboxID == "" {
		if spec.ID == "" {
			spec.ID = sandbox.NewID()
		}
		sandboxID = spec.ID
	}
	if !spec.Network.Enabled() {
		return fmt.Errorf("secret %s: inject needs the egress proxy (network.egress)", ps[0].Cred.Name)
	}
	creds := make([]credinject.Credential, len(ps))
	for i, p := range ps {
		creds[i] = p.Cred
	}
	set, err := credinject.New(credinject.Options{SandboxID: sandboxID, Credentials: creds, Events: events})
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.Cred.AWS != nil {
			kid, sec, tok, _ := set.AWSPlaceholder(p.Cred.Name)
			spec.Secrets = append(spec.Secrets, sandbox.Secret{Name: awsKeyVar, Value: []byte(kid)},
				sandbox.Secret{Name: awsSecretVar, Value: []byte(sec)})
			if tok != "" {
				spec.Secrets = append(spec.Secrets, sandbox.Secret{Name: awsSessionVar, Value: []byte(tok)})
			}
			continue
		}
		ph, _ := set.Placeholder(p.Cred.Name)
		spec.Secrets = append(spec.Secrets, sandbox.Secret{Name: p.Cred.Name, Value: []byte(ph), AsFile: p.AsFile})
	}
	if ca == nil {
		if ca, err = egress.NewCA("mcpbox " + sandboxID); err != nil {
			return err
		}
	}
	system, err := credinject.HostBundle()
	if err != nil {
		return fmt.Errorf("secret %s: the sandbox's trust bundle: %w", ps[0].Cred.Name, err)
	}
	spec.Network.Injector, spec.Network.CA = set, ca
	spec.Network.TrustBundle = credinject.TrustBundle(system, ca)
	spec.Env = append(spec.Env, credinject.TrustEnv(sandbox.TrustBundlePath, sandbox.TrustCAPath)...)
	return nil
}

// ResolveAll resolves secs with ctx: the plain secrets as sandbox
// secrets, those with inject as proxy secrets.
func ResolveAll(ctx context.Context, secs []config.Secret) ([]sandbox.Secret, []ProxySecret, error) {
	var plain []sandbox.Secret
	var proxied []ProxySecret
	for _, sec := range secs {
		if sec.Inject != nil {
			p, err := ResolveProxySecret(ctx, sec)
			if err != nil {
				return nil, nil, fmt.Errorf("secret %s: %w", sec.Name, err)
			}
			proxied = append(proxied, p)
			continue
		}
		v, err := ResolveSecret(ctx, sec.Name, sec.From, sec.As == config.SecretAsFile)
		if err != nil {
			return nil, nil, fmt.Errorf("secret %s: %w", sec.Name, err)
		}
		plain = append(plain, v)
	}
	return plain, proxied, nil
}

// SecretObserver, if the Observer implements it, is told of every
// substitution and refusal of a secret added at the proxy
// (*guard.Guard audits them). It never sees a value.
type SecretObserver interface {
	SecretEvent(launcher string, scope gateway.Scope, t *track.Sandbox, ev credinject.Event)
}

// setupProxySecrets applies the secrets added at the proxy to this
// sandbox's spec: its placeholders, the gateway's CA, events to the
// observer and the log.
func (in *sandboxInstance) setupProxySecrets(ps []ProxySecret) error {
	if len(ps) == 0 {
		return nil
	}
	l, rec := in.l, in.rec
	logEv := SecretEventLogger(l.log, l.name)
	so, _ := l.observer.(SecretObserver)
	err := ApplyProxySecrets(&in.spec, ps, rec.ID, l.ca, func(ev credinject.Event) {
		ev = redactSecretEvent(l.book, ev)
		logEv(ev)
		if so != nil {
			so.SecretEvent(l.name, in.scope, rec, ev)
		}
	})
	if set, ok := in.spec.Network.Injector.(*credinject.Set); ok && err == nil {
		rec.SetPlaceholders(set.Placeholders()) // not credentials in its results
	}
	return err
}

// SecretEventLogger logs a proxy secret's events to log: refusals as
// warnings, substitutions at debug level. server may be "".
func SecretEventLogger(log *slog.Logger, server string) func(credinject.Event) {
	return func(ev credinject.Event) {
		level, msg := slog.LevelWarn, "secret placeholder refused"
		switch ev.Kind {
		case "inject":
			level, msg = slog.LevelDebug, "secret added at the proxy"
		case "exfiltration":
			msg = "secret placeholder refused: not one of its hosts (exfiltration attempt)"
		}
		attrs := []any{"secret", ev.Credential, "host", ev.Host, "port", ev.Port, "sandbox", ev.SandboxID}
		if server != "" {
			attrs = append(attrs, "server", server)
		}
		if ev.Where != "" {
			attrs = append(attrs, "where", ev.Where)
		}
		if ev.Reason != "" {
			attrs = append(attrs, "reason", ev.Reason)
		}
		log.Log(context.Background(), level, msg, attrs...)
	}
}

// isPlaceholder reports whether sec is a placeholder of spec's proxy
// secrets (a spec prepared by ApplyProxySecrets already: run --policy).
func isPlaceholder(spec sandbox.Spec, sec sandbox.Secret) bool {
	set, ok := spec.Network.Injector.(*credinject.Set)
	return ok && set.IsPlaceholder(string(sec.Value))
}
