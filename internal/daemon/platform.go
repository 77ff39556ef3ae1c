package daemon

import (
	"fmt"
	"runtime"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/sandbox"
)

// goos is the system the gateway runs on; a test sets another to see what
// a macOS gateway refuses (macOS builds are only cross-compiled in CI).
var goos = runtime.GOOS

// checkPlatform returns a *ConfigError naming the servers of c that need a
// local sandbox (neither remote nor of the kubernetes backend) when goos
// cannot run one (sandbox.LocalSupported: macOS); nil otherwise. serve,
// pin and update ask first, before a state dir, package or sandbox is
// made, so that the user reads this and not a missing layer's error.
func checkPlatform(c *config.Config, goos string) error {
	if sandbox.LocalSupported(goos) == nil {
		return nil
	}
	var local []string
	for _, s := range c.Servers {
		if s.URL == "" && !c.IsKubernetes(s) {
			local = append(local, s.Name)
		}
	}
	switch len(local) {
	case 0:
		return nil
	case 1:
		return configError(fmt.Errorf("server %s: %w", local[0], sandbox.ErrNeedsLinux))
	}
	return configError(fmt.Errorf("servers %s: %w", strings.Join(local, ", "), sandbox.ErrNeedsLinux))
}
