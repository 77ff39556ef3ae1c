package sandbox

// Where a sandbox whose proxy injects credentials finds the proxy CA
// (Network.TrustBundle): the bundle (the host's certificates and the
// CA's) and the CA's certificate alone.
const (
	TrustBundlePath = "/run/mcpbox/ca-bundle.pem"
	TrustCAPath     = "/run/mcpbox/ca.pem"
)
