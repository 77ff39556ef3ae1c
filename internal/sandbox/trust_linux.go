package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
)

// systemBundle is the system trust bundle path the sandbox's TrustBundle
// is bound over, when the host's root shows it (Debian's layout; the
// TLS variables of credinject.TrustEnv cover the other stacks).
const systemBundle = "/etc/ssl/certs/ca-certificates.crt"

// addTrust writes the Network's trust bundle and CA certificate into the
// egress dir (removed with it) and binds them into the sandbox.
// Preconditions: startEgress has run.
func (sb *Sandbox) addTrust() error {
	n := sb.spec.Network
	if n.Injector == nil || n.CA == nil {
		return nil
	}
	files := []struct {
		name    string
		data    []byte
		targets []string
	}{
		{"ca-bundle.pem", n.TrustBundle, []string{TrustBundlePath}},
		{"ca.pem", n.CA.CertPEM(), []string{TrustCAPath}},
	}
	if sb.spec.Root == "" && len(n.TrustBundle) > 0 {
		if st, err := os.Lstat(systemBundle); err == nil && st.Mode().IsRegular() {
			files[0].targets = append(files[0].targets, systemBundle)
		}
	}
	for _, f := range files {
		if len(f.data) == 0 {
			continue
		}
		p := filepath.Join(sb.egressDir, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return fmt.Errorf("writing the sandbox trust bundle: %w", err)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		for _, t := range f.targets {
			sb.extraBinds = append(sb.extraBinds, Mount{Source: real, Target: t})
		}
	}
	return nil
}
