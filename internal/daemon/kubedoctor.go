package daemon

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"mcpbox/internal/kube"
)

// KubeDoctorFile is KubeDoctor for the config file at path, bounded by a
// minute: `mcpbox doctor --backend kubernetes --config FILE`.
func KubeDoctorFile(path string, w io.Writer) (bool, error) {
	c, err := LoadConfig(path)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return KubeDoctor(ctx, c, filepath.Dir(path), w)
}

// KubeRBAC is `mcpbox kube rbac`: the Role and RoleBinding (YAML) of
// subject in namespace ns, with get on the Secrets that the kubernetes:
// references of the config at path name in ns (path "": none). An empty
// ns is the config's kubernetes backend's namespace, else "mcp".
func KubeRBAC(path, ns, subject string) ([]byte, error) {
	var names []string
	if path != "" {
		c, err := LoadConfig(path)
		if err != nil {
			return nil, err
		}
		groups := kubeBackends(c)
		if len(groups) == 0 {
			// A Role for a config that runs no pod grants nothing it needs.
			return nil, fmt.Errorf("%s has no backend of kind kubernetes (backend: {kind: kubernetes, namespace: NS, ...})", path)
		}
		ns = cmp.Or(ns, groups[0][0].Namespace)
		for _, r := range c.KubeSecretRefs(cmp.Or(ns, "mcp")) {
			names = append(names, r.Secret)
		}
	}
	return kube.RBAC(cmp.Or(ns, "mcp"), subject, names...)
}
