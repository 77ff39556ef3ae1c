package launch

import (
	"context"

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
