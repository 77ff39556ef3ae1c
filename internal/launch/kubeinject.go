package launch

import (
	"context"
	"strings"

	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/kube"
)

// KubeInject serves a kubernetes server's secrets added at the egress
// proxy: the pod gets placeholders and the interception CA's trust over
// its agent's start request, the proxy's replicas the real values over
// the gateway's registration (mutual TLS, memory only): never the API.
type KubeInject struct {
	// CA is the interception CA, whose certificate the pod trusts.
	CA *egress.CA
	// Register hands every proxy replica pod's credentials (real values)
	// and the placeholders the pod gets; an error fails the start.
	Register func(ctx context.Context, pod string, creds []credinject.Credential, fakes map[string]credinject.Fakes) error
	// Unregister takes pod's registration back (the pod stopped).
	Unregister func(pod string)
}

// setupProxySecrets makes the pod's placeholders for ps, puts them and
// the trust variables into its start request (env, files), and
// registers the pod's credentials with the egress proxy. The trust files
// themselves are the pod's trust container's (PodOptions.TrustCA): the
// image's own bundle with the CA, also over the system bundle paths.
func (in *kubeInstance) setupProxySecrets(ctx context.Context, ps []ProxySecret, env map[string]string, files map[string][]byte) error {
	ki := in.k.o.Inject
	creds := make([]credinject.Credential, len(ps))
	for i, p := range ps {
		creds[i] = p.Cred
	}
	set, err := credinject.New(credinject.Options{SandboxID: in.pod, Credentials: creds})
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.Cred.AWS != nil {
			kid, sec, tok, _ := set.AWSPlaceholder(p.Cred.Name)
			env[awsKeyVar], env[awsSecretVar] = kid, sec
			if tok != "" {
				env[awsSessionVar] = tok
			}
			continue
		}
		ph, _ := set.Placeholder(p.Cred.Name)
		if p.AsFile {
			files[p.Cred.Name] = []byte(ph)
		} else {
			env[p.Cred.Name] = ph
		}
	}
	for _, kv := range credinject.TrustEnv(kube.TrustDir+"/"+kube.TrustBundleName, kube.TrustDir+"/"+kube.TrustCAName) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if err := ki.Register(ctx, in.pod, creds, set.Fakes()); err != nil {
		return err
	}
	in.registered = true
	return nil
}

// SecretEvent audits one event of a secret added at the proxy (the
// proxy's log line) for pod, as a local sandbox's is: logged, and told
// to the observer with the pod's scope and sandbox. It reports false for
// a pod this backend did not start (or that stopped a minute ago).
func (k *Kube) SecretEvent(pod string, ev credinject.Event) bool {
	k.podsMu.Lock()
	in := k.byPod[pod]
	k.podsMu.Unlock()
	if in == nil {
		return false
	}
	ev.SandboxID = in.rec.ID
	ev = redactSecretEvent(k.o.Book, ev)
	SecretEventLogger(k.log, k.o.Name)(ev)
	if so, ok := k.obs().(SecretObserver); ok {
		so.SecretEvent(k.o.Name, in.scope, in.rec, ev)
	}
	return true
}
