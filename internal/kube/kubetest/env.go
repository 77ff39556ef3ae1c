package kubetest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// env is a container's environment as the kubelet builds it: PATH and
// HOSTNAME, the KUBERNETES_SERVICE_* variables (pointing at the API server
// itself, there being no Service routing), envFrom, then env in order,
// each value with $(VAR) references to earlier variables expanded.
func (r *podRun) env(c corev1.Container) ([]string, error) {
	port := r.n.c.Server[strings.LastIndexByte(r.n.c.Server, ':')+1:]
	vars := map[string]string{
		"PATH":                    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOSTNAME":                r.name,
		"KUBERNETES_SERVICE_HOST": "127.0.0.1",
		"KUBERNETES_SERVICE_PORT": port,
		"KUBERNETES_PORT":         "tcp://127.0.0.1:" + port,
	}
	order := []string{"PATH", "HOSTNAME", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_PORT"}
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, from := range c.EnvFrom {
		data := map[string]string{}
		switch {
		case from.SecretRef != nil:
			var s corev1.Secret
			err := r.get("secrets", from.SecretRef.Name, &s)
			if IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
				continue
			}
			if err != nil {
				return nil, err
			}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		case from.ConfigMapRef != nil:
			var cm corev1.ConfigMap
			err := r.get("configmaps", from.ConfigMapRef.Name, &cm)
			if IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
				continue
			}
			if err != nil {
				return nil, err
			}
			data = cm.Data
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		v, err := r.envValue(e, vars)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		set(e.Name, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

func (r *podRun) envValue(e corev1.EnvVar, vars map[string]string) (string, error) {
	if e.ValueFrom == nil {
		return expand(e.Value, vars), nil
	}
	switch f := e.ValueFrom; {
	case f.FieldRef != nil:
		return r.fieldRef(f.FieldRef.FieldPath)
	case f.SecretKeyRef != nil:
		var s corev1.Secret
		err := r.get("secrets", f.SecretKeyRef.Name, &s)
		optional := f.SecretKeyRef.Optional != nil && *f.SecretKeyRef.Optional
		if err != nil {
			if IsNotFound(err) && optional {
				return "", nil
			}
			return "", err
		}
		v, ok := s.Data[f.SecretKeyRef.Key]
		if !ok && !optional {
			return "", fmt.Errorf("secret %s has no key %q", f.SecretKeyRef.Name, f.SecretKeyRef.Key)
		}
		return string(v), nil
	case f.ConfigMapKeyRef != nil:
		var cm corev1.ConfigMap
		err := r.get("configmaps", f.ConfigMapKeyRef.Name, &cm)
		optional := f.ConfigMapKeyRef.Optional != nil && *f.ConfigMapKeyRef.Optional
		if err != nil {
			if IsNotFound(err) && optional {
				return "", nil
			}
			return "", err
		}
		v, ok := cm.Data[f.ConfigMapKeyRef.Key]
		if !ok && !optional {
			return "", fmt.Errorf("configMap %s has no key %q", f.ConfigMapKeyRef.Name, f.ConfigMapKeyRef.Key)
		}
		return v, nil
	}
	return "", &unsupportedError{"env valueFrom other than fieldRef, secretKeyRef and configMapKeyRef"}
}

// fieldRef resolves a downward-API field path of the pod.
func (r *podRun) fieldRef(path string) (string, error) {
	p := r.pod
	if k, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return p.Labels[strings.TrimSuffix(k, "']")], nil
	}
	if k, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return p.Annotations[strings.TrimSuffix(k, "']")], nil
	}
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return r.ip, nil
	case "status.hostIP", "status.hostIPs":
		return "127.0.0.1", nil
	}
	return "", &unsupportedError{"field path " + strconv.Quote(path)}
}

// expand replaces $(NAME) by the variable's value where it is defined and
// $$ by $, as the kubelet expands env values, command and args.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteByte('$')
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
