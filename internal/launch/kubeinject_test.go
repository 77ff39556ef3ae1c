package launch

import (
	"context"
	"strings"
	"testing"

	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/kube"
)

// TestKubeProxySecretsTrust: the pod's start request holds the
// placeholder and the trust variables pointing at the trust container's
// files (kube.TrustDir), never the value, the CA's key or a bundle of
// the gateway host's (the image's own is merged in the pod); the proxy
// gets the real value with the same placeholder.
func TestKubeProxySecretsTrust(t *testing.T) {
	ca, err := egress.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	const real = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
	var gotCreds []credinject.Credential
	var gotFakes map[string]credinject.Fakes
	k := &Kube{o: KubeOptions{Inject: &KubeInject{CA: ca, Register: func(_ context.Context, pod string, creds []credinject.Credential, fakes map[string]credinject.Fakes) error {
		gotCreds, gotFakes = creds, fakes
		return nil
	}}}}
	in := &kubeInstance{k: k, pod: "p"}
	env, files := map[string]string{}, map[string][]byte{}
	ps := []ProxySecret{{Cred: credinject.Credential{Name: "T", Value: real, Hosts: []string{"api.example.com"}, Header: "Authorization", Format: "Bearer {value}"}}}
	if err := in.setupProxySecrets(context.Background(), ps, env, files); err != nil {
		t.Fatal(err)
	}
	if !in.registered || len(gotCreds) != 1 || gotCreds[0].Value != real || gotFakes["T"].Value != env["T"] {
		t.Fatalf("registered %v: creds %d, fakes %+v, pod's T %q", in.registered, len(gotCreds), gotFakes, env["T"])
	}
	bundle, caOnly := kube.TrustDir+"/"+kube.TrustBundleName, kube.TrustDir+"/"+kube.TrustCAName
	for _, kv := range credinject.TrustEnv(bundle, caOnly) {
		k, v, _ := strings.Cut(kv, "=")
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if len(files) != 0 {
		t.Errorf("the start request carries files %d: the trust files are the trust container's", len(files))
	}
	for k, v := range env {
		if strings.Contains(v, real) || strings.Contains(v, "PRIVATE KEY") || strings.Contains(v, "BEGIN CERTIFICATE") {
			t.Errorf("the pod's %s holds a value, a key or a bundle", k)
		}
	}
}
