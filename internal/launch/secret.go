package launch

import (
	"context"
	"fmt"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/secrets"
)

// ResolveSecret parses ref (once: config.ParseSecretRef, the syntax's one
// parser) and resolves it with ctx, as the secret name: cancelling ctx
// stops a cmd: provider. A start resolves its server's secrets with the
// start's context; the CLI resolves flags and tokens with its own.
func ResolveSecret(ctx context.Context, name, ref string, asFile bool) (sandbox.Secret, error) {
	r, err := config.ParseSecretRef(ref)
	if err != nil {
		return sandbox.Secret{}, err
	}
	v, err := secrets.Resolve(ctx, secrets.Ref(r), secrets.Options{})
	if err != nil {
		return sandbox.Secret{}, err
	}
	return sandbox.Secret{Name: name, Value: v, AsFile: asFile}, nil
}

// CheckSecret says whether ref could be resolved now, as secrets.Check
// does: a named pipe or a device is looked up, never opened.
func CheckSecret(ctx context.Context, ref string) error {
	r, err := config.ParseSecretRef(ref)
	if err != nil {
		return err
	}
	return secrets.Check(ctx, secrets.Ref(r), secrets.Options{})
}

// SecretFlag reads a --secret flag, NAME=REF[,as=env|file], and resolves
// REF with ctx. The value stays in memory; errors name the flag's NAME,
// never the reference's value.
func SecretFlag(ctx context.Context, flag string) (sandbox.Secret, error) {
	name, rest, ok := strings.Cut(flag, "=")
	if !ok || name == "" {
		return sandbox.Secret{}, fmt.Errorf("--secret %s: want NAME=REF[,as=env|file]", name)
	}
	ref, as := rest, "env"
	if i := strings.LastIndex(rest, ",as="); i >= 0 {
		ref, as = rest[:i], rest[i+len(",as="):]
	}
	if as != "env" && as != "file" {
		return sandbox.Secret{}, fmt.Errorf("--secret %s: as=%s: want env or file", name, as)
	}
	sec, err := ResolveSecret(ctx, name, ref, as == "file")
	if err != nil {
		return sandbox.Secret{}, fmt.Errorf("--secret %s: %w", name, err)
	}
	return sec, nil
}
