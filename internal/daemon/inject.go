package daemon

import (
	"os"
	"strconv"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/guard"
	"mcpbox/internal/launch"
)

// proxyCA is the gateway's one CA for the secrets its servers add at the
// egress proxy (secrets.NAME.inject): made in memory, its key never
// written to disk; it leaves this process only to the Kubernetes egress
// proxy's replicas (proxyRegistry, over mutual TLS, into their memory)
// when a kubernetes server injects. nil when no server injects.
func proxyCA(c *config.Config) (*egress.CA, error) {
	for _, s := range c.Servers {
		for _, sec := range s.Secrets {
			if sec.Inject != nil {
				return egress.NewCA("mcpbox proxy CA (pid " + strconv.Itoa(os.Getpid()) + ")")
			}
		}
	}
	return nil, nil
}

// The guard audits the secrets' substitutions and refusals.
var _ launch.SecretObserver = (*guard.Guard)(nil)
