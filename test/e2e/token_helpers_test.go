package e2e

import (
	"os"
	"slices"
	"testing"

	"mcpbox/internal/config"
)

// noAuthArgs adds --no-auth to serve's args when they name a config
// without clients: the gateway tests speak to it without a token, as
// they did before such configs got one (token_test.go tests the token).
// The embedded default (no --config) keeps its token.
func noAuthArgs(tb testing.TB, args []string) []string {
	tb.Helper()
	i := slices.Index(args, "--config")
	if i < 0 || i+1 >= len(args) || slices.Contains(args, "--no-auth") {
		return args
	}
	b, err := os.ReadFile(args[i+1])
	if err != nil {
		return args // serve says what is wrong
	}
	c, err := config.Load(args[i+1], b)
	if err != nil || len(c.Clients) > 0 {
		return args
	}
	return append(slices.Clip(args), "--no-auth")
}
