package kube

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// SecretKeyRef names a key of a Secret's data.
type SecretKeyRef struct {
	Name, Key string
}

// SecretKey reads key of the Secret name in ns: a server's secret that
// an existing Secret holds. Its errors are one line that says what is
// wrong (no such Secret, no such key, no permission) and never hold a
// value; the other keys' values are dropped with the object.
func (c *Client) SecretKey(ctx context.Context, ns, name, key string) ([]byte, error) {
	var s corev1.Secret
	err := c.Get(ctx, Secrets, ns, name, &s)
	switch {
	case IsNotFound(err):
		return nil, fmt.Errorf("kubernetes Secret %s/%s does not exist", ns, name)
	case IsForbidden(err):
		return nil, fmt.Errorf("kubernetes Secret %s/%s: the gateway may not read it (403 forbidden): apply `mcpbox kube rbac --config FILE`, which grants get on the Secrets the config names", ns, name)
	case err != nil:
		return nil, fmt.Errorf("kubernetes Secret %s/%s: %w", ns, name, err)
	}
	v, ok := s.Data[key]
	if !ok {
		// The keys' names (never their values) show a misspelt KEY.
		keys := slices.Sorted(maps.Keys(s.Data))
		if len(keys) > 8 {
			keys = append(keys[:8], "...")
		}
		return nil, fmt.Errorf("kubernetes Secret %s/%s has no key %q (its keys: %s)", ns, name, key, cmp.Or(strings.Join(keys, ", "), "none"))
	}
	return v, nil
}
