package credinject

import (
	"bytes"
	"fmt"
	"os"

	"mcpbox/internal/egress"
)

// hostBundles are where Linux distributions keep the system trust bundle
// (the list crypto/x509 reads).
var hostBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

// HostBundle returns the host's trust bundle in PEM: SSL_CERT_FILE if set,
// else the first of the distributions' usual files that exists.
func HostBundle() ([]byte, error) {
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading SSL_CERT_FILE: %w", err)
		}
		return b, nil
	}
	for _, f := range hostBundles {
		if b, err := os.ReadFile(f); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("no trust bundle found (set SSL_CERT_FILE)")
}

// TrustBundle returns the bundle a sandbox trusts when credentials are
// injected: the host's certificates (system, as HostBundle returns them)
// followed by the proxy CA's certificate. It holds no key.
func TrustBundle(system []byte, ca *egress.CA) []byte {
	var b bytes.Buffer
	b.Write(system)
	if len(system) > 0 && system[len(system)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.Write(ca.CertPEM())
	return b.Bytes()
}

// TrustEnv returns the variables that point the common TLS stacks inside
// a sandbox at bundle (the merged TrustBundle) and caOnly (the CA's
// certificate alone, for Node, which adds it to its own roots).
func TrustEnv(bundle, caOnly string) []string {
	return []string{
		"SSL_CERT_FILE=" + bundle,      // OpenSSL, Go, Ruby, Python ssl
		"REQUESTS_CA_BUNDLE=" + bundle, // Python requests
		"CURL_CA_BUNDLE=" + bundle,     // curl
		"GIT_SSL_CAINFO=" + bundle,     // git
		"AWS_CA_BUNDLE=" + bundle,      // AWS CLI and SDKs
		"PIP_CERT=" + bundle,           // pip
		"NODE_EXTRA_CA_CERTS=" + caOnly,
	}
}
