package kubetest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
)

// volume is where one pod volume lives on the host.
type volume struct {
	path string
	ro   bool // the source says read-only (secret, configMap, projected, downwardAPI, a read-only claim)
}

// unsupportedError is a pod the test node cannot run at all.
type unsupportedError struct{ what string }

func (e *unsupportedError) Error() string { return "the test node does not support " + e.what }

// writeVolumes makes each volume's host directory and fills it the way the
// kubelet would: secret, configMap, projected and downwardAPI volumes as
// files (mode defaultMode or 0644, read-only in the container), emptyDir
// as an empty dir of mode 0777, a claim as PVCDir, hostPath as the path.
func (r *podRun) writeVolumes() error {
	vols := map[string]volume{}
	for _, v := range r.pod.Spec.Volumes {
		dir := filepath.Join(r.dir, "vol", v.Name)
		vol := volume{path: dir, ro: true}
		var err error
		switch s := v.VolumeSource; {
		case s.EmptyDir != nil:
			vol.ro = false
			// medium Memory too: a tmpfs would have to be mounted on the
			// host to be shared by the pod's containers.
			err = mkdirMode(dir, 0o777)
		case s.Secret != nil:
			err = r.writeProjection(dir, s.Secret.DefaultMode, []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.Secret.SecretName}, Items: s.Secret.Items, Optional: s.Secret.Optional,
			}}})
		case s.ConfigMap != nil:
			err = r.writeProjection(dir, s.ConfigMap.DefaultMode, []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: s.ConfigMap.LocalObjectReference, Items: s.ConfigMap.Items, Optional: s.ConfigMap.Optional,
			}}})
		case s.DownwardAPI != nil:
			err = r.writeProjection(dir, s.DownwardAPI.DefaultMode, []corev1.VolumeProjection{{DownwardAPI: &corev1.DownwardAPIProjection{Items: s.DownwardAPI.Items}}})
		case s.Projected != nil:
			err = r.writeProjection(dir, s.Projected.DefaultMode, s.Projected.Sources)
		case s.PersistentVolumeClaim != nil:
			vol.path, vol.ro = r.n.PVCDir(r.ns, s.PersistentVolumeClaim.ClaimName), s.PersistentVolumeClaim.ReadOnly
			var pvc corev1.PersistentVolumeClaim
			if err = r.get("persistentvolumeclaims", s.PersistentVolumeClaim.ClaimName, &pvc); err == nil {
				err = mkdirMode(vol.path, 0o777)
			}
		case s.HostPath != nil:
			vol.path, vol.ro = s.HostPath.Path, false
			if s.HostPath.Type != nil && *s.HostPath.Type == corev1.HostPathDirectoryOrCreate {
				err = os.MkdirAll(vol.path, 0o755)
			} else if _, err = os.Stat(vol.path); err != nil {
				err = fmt.Errorf("hostPath volume %s: %w", v.Name, err)
			}
		default:
			return &unsupportedError{fmt.Sprintf("volume %s: only emptyDir, secret, configMap, projected, downwardAPI, persistentVolumeClaim and hostPath volumes run here", v.Name)}
		}
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		vols[v.Name] = vol
	}
	r.mu.Lock()
	r.vols = vols
	r.mu.Unlock()
	return nil
}

func mkdirMode(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	return os.Chmod(dir, mode) // past the umask
}

// writeProjection writes the files of a projected volume (and of the
// single-source kinds, which are projections of one source) afresh.
func (r *podRun) writeProjection(dir string, defaultMode *int32, sources []corev1.VolumeProjection) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := int32(0o644)
	if defaultMode != nil {
		mode = *defaultMode
	}
	files := map[string][]byte{}
	modes := map[string]int32{}
	for _, src := range sources {
		switch {
		case src.Secret != nil:
			var s corev1.Secret
			err := r.get("secrets", src.Secret.Name, &s)
			if IsNotFound(err) && src.Secret.Optional != nil && *src.Secret.Optional {
				continue
			}
			if err != nil {
				return err
			}
			if err := pick(files, modes, s.Data, src.Secret.Items, "secret "+src.Secret.Name); err != nil {
				return err
			}
		case src.ConfigMap != nil:
			var cm corev1.ConfigMap
			err := r.get("configmaps", src.ConfigMap.Name, &cm)
			if IsNotFound(err) && src.ConfigMap.Optional != nil && *src.ConfigMap.Optional {
				continue
			}
			if err != nil {
				return err
			}
			data := map[string][]byte{}
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
			for k, v := range cm.BinaryData {
				data[k] = v
			}
			if err := pick(files, modes, data, src.ConfigMap.Items, "configMap "+src.ConfigMap.Name); err != nil {
				return err
			}
		case src.DownwardAPI != nil:
			for _, it := range src.DownwardAPI.Items {
				if it.FieldRef == nil {
					return &unsupportedError{"downwardAPI items other than fieldRef"}
				}
				v, err := r.fieldRef(it.FieldRef.FieldPath)
				if err != nil {
					return err
				}
				files[it.Path] = []byte(v)
				if it.Mode != nil {
					modes[it.Path] = *it.Mode
				}
			}
		case src.ServiceAccountToken != nil:
			tok, err := r.token(src.ServiceAccountToken)
			if err != nil {
				return err
			}
			files[src.ServiceAccountToken.Path] = []byte(tok)
		default:
			return &unsupportedError{"projected sources other than secret, configMap, downwardAPI and serviceAccountToken"}
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !filepath.IsLocal(name) {
			return fmt.Errorf("volume file path %q leaves the volume", name)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		m, ok := modes[name]
		if !ok {
			m = mode
		}
		if err := os.WriteFile(p, files[name], 0o600); err != nil {
			return err
		}
		if err := os.Chmod(p, os.FileMode(m)&0o777); err != nil {
			return err
		}
		// The kubelet gives a volume's files the pod's fsGroup as group,
		// so that a mode such as 0440 is readable by the pod's user.
		if sc := r.pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
			if err := os.Chown(p, -1, int(*sc.FSGroup)); err != nil {
				return err
			}
		}
	}
	return nil
}

// pick adds a source's keys to files: all of them, or the listed items
// at their paths.
func pick(files map[string][]byte, modes map[string]int32, data map[string][]byte, items []corev1.KeyToPath, what string) error {
	if len(items) == 0 {
		for k, v := range data {
			files[k] = v
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		files[it.Path] = v
		if it.Mode != nil {
			modes[it.Path] = *it.Mode
		}
	}
	return nil
}

// token asks the API server for a service-account token bound to the pod.
func (r *podRun) token(p *corev1.ServiceAccountTokenProjection) (string, error) {
	sa := r.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: p.ExpirationSeconds,
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: r.name, UID: r.uid},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	var out authv1.TokenRequest
	err := r.n.c.Admin.Do(context.Background(), http.MethodPost, "/api/v1/namespaces/"+r.ns+"/serviceaccounts/"+sa+"/token", req, &out)
	if err != nil {
		return "", fmt.Errorf("requesting a token of service account %s: %w", sa, err)
	}
	return out.Status.Token, nil
}

// get reads an object of the pod's namespace.
func (r *podRun) get(resource, name string, out any) error {
	return r.n.c.Admin.Do(context.Background(), http.MethodGet, "/api/v1/namespaces/"+r.ns+"/"+resource+"/"+name, nil, out)
}
