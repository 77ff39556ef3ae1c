package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.yaml.in/yaml/v3"
)

// Rules are the permissions the gateway needs in its namespace, and no
// more: it reads no Secret but the ones named in secrets (those its
// config's kubernetes: references name: get, by name only), creates and
// deletes the pods' TLS Secrets, never execs into a pod; it reads pods'
// logs (pods/log get) to follow its egress proxy pods' decisions into the
// audit, and pod servers' stderr.
func Rules(secrets ...string) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "watch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"create", "get", "delete"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"create", "get", "delete"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "get", "delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "get", "list", "patch", "delete"}},
	}
	if len(secrets) > 0 {
		// resourceNames: an empty list would mean every Secret.
		names := slices.Compact(slices.Sorted(slices.Values(secrets)))
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: names, Verbs: []string{"get"}})
	}
	return rules
}

// RBAC returns the Role and its RoleBinding to subject (a service
// account "system:serviceaccount:NS:NAME" or a user name) as YAML, for
// `kubectl apply -f -`; secrets are the Secrets it may read (Rules).
func RBAC(ns, subject string, secrets ...string) ([]byte, error) {
	role := rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: "mcpbox-gateway", Namespace: ns, Labels: map[string]string{LabelManagedBy: ManagedBy}},
		Rules:      Rules(secrets...),
	}
	subj := rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: subject}
	if rest, ok := strings.CutPrefix(subject, "system:serviceaccount:"); ok {
		sns, name, _ := strings.Cut(rest, ":")
		subj = rbacv1.Subject{Kind: "ServiceAccount", Namespace: sns, Name: name}
	}
	bind := rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: role.ObjectMeta,
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{subj},
	}
	var out []byte
	for i, obj := range []any{role, bind} {
		y, err := toYAML(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, y...)
	}
	return out, nil
}

// toYAML is obj's JSON form (the API's field names) as YAML.
func toYAML(obj any) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// CanI asks the API server whether the client may do verb on resource of
// group in ns (a SelfSubjectAccessReview).
func (c *Client) CanI(ctx context.Context, ns, group, resource, verb string) (bool, error) {
	return c.canI(ctx, ns, group, resource, "", verb)
}

// canI is CanI on the object name ("": any).
func (c *Client) canI(ctx context.Context, ns, group, resource, name, verb string) (bool, error) {
	resource, sub, _ := strings.Cut(resource, "/") // pods/log: resource pods, subresource log
	r := authorizationv1.SelfSubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectAccessReview"},
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Group: group, Resource: resource, Subresource: sub, Name: name, Verb: verb}},
	}
	if err := c.Create(ctx, AccessReviews, "", &r, &r); err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

// shellWord is s as one word of a shell command to copy: quoted unless
// it is made of characters no shell treats specially.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// whoAmI is the user name the API server knows c by (a
// SelfSubjectReview, Kubernetes 1.28 and later); "" when it does not say.
func (c *Client) whoAmI(ctx context.Context) string {
	r := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
	var out struct {
		Status struct {
			UserInfo struct{ Username string } `json:"userInfo"`
		}
	}
	if err := c.Create(ctx, SelfReviews, "", r, &out); err != nil {
		return ""
	}
	return out.Status.UserInfo.Username
}

// Check is one line of `mcpbox doctor --backend kubernetes`.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// Doctor checks what the backend needs of a cluster: API access, every
// permission of Rules in ns (with get on the Secrets secrets name), the
// NetworkPolicy API, runtimeClass if set, and that each of secrets can be
// read and has its key.
func Doctor(ctx context.Context, c *Client, ns, runtimeClass string, secrets []SecretKeyRef) []Check {
	var out []Check
	var ver struct{ GitVersion string }
	if err := c.do(ctx, "GET", "/version", nil, nil, "", &ver); err != nil {
		return append(out, Check{"api", false, err.Error()})
	}
	out = append(out, Check{"api", true, "kubernetes " + ver.GitVersion + " at " + c.base.Host})
	var names []string
	for _, s := range secrets {
		names = append(names, s.Name)
	}
	var missing []string
	for _, r := range Rules(names...) {
		objs := r.ResourceNames
		if objs == nil {
			objs = []string{""}
		}
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				for _, name := range objs {
					ok, err := c.canI(ctx, ns, r.APIGroups[0], res, name, v)
					if err != nil {
						return append(out, Check{"rbac", false, err.Error()})
					}
					if !ok {
						missing = append(missing, strings.TrimSpace(v+" "+qualified(r.APIGroups[0], res)+" "+name))
					}
				}
			}
		}
	}
	out = append(out, namespaceCheck(ctx, c, ns))
	if missing != nil {
		// The Role binds the user doctor runs as, whom the default
		// --subject (the in-cluster service account) need not name.
		apply := "mcpbox kube rbac --config FILE"
		if who := c.whoAmI(ctx); who != "" {
			apply += " --subject " + shellWord(who)
		}
		out = append(out, Check{"rbac", false, fmt.Sprintf("namespace %s: may not %s (apply `%s`)", ns, strings.Join(missing, ", "), apply)})
	} else {
		out = append(out, Check{"rbac", true, "namespace " + ns + ": every permission of `mcpbox kube rbac`"})
	}
	for _, s := range secrets {
		if _, err := c.SecretKey(ctx, ns, s.Name, s.Key); err != nil {
			out = append(out, Check{"secret", false, err.Error()})
		} else {
			out = append(out, Check{"secret", true, ns + "/" + s.Name + " has key " + s.Key + " and the gateway may read it"})
		}
	}
	if err := c.do(ctx, "GET", NetworkPolicies.API, nil, nil, "", nil); err != nil {
		out = append(out, Check{"networkpolicy", false, "the NetworkPolicy API is not served: " + err.Error()})
	} else {
		out = append(out, Check{"networkpolicy", true, "API served (enforced only if the cluster's network plugin implements it)"})
	}
	if runtimeClass != "" {
		out = append(out, RuntimeClassCheck(ctx, c, runtimeClass))
	}
	return out
}

// RuntimeClassCheck checks that the runtime class name exists.
func RuntimeClassCheck(ctx context.Context, c *Client, name string) Check {
	err := c.Get(ctx, RuntimeClasses, "", name, nil)
	switch {
	case err == nil:
		return Check{"runtimeclass", true, name + " exists"}
	case IsForbidden(err):
		return Check{"runtimeclass", true, name + ": not verifiable (no permission to read runtimeclasses); pods fail to schedule if it is missing"}
	default:
		return Check{"runtimeclass", false, name + ": " + err.Error()}
	}
}

// namespaceCheck finds out whether ns exists with what the Role allows: a
// namespaced Role cannot grant reading the namespace, but a dry-run create
// goes through admission, which refuses a namespace that does not exist.
// Access reviews alone answer "allowed" for a namespace nobody made.
func namespaceCheck(ctx context.Context, c *Client, ns string) Check {
	probe := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"generateName": "mcpbox-doctor-"}}
	err := c.do(ctx, "POST", ConfigMaps.path(ns, ""), url.Values{"dryRun": {"All"}}, probe, "", nil)
	switch {
	case err == nil:
		return Check{"namespace", true, ns + " exists"}
	case IsNotFound(err):
		return Check{"namespace", false, ns + " does not exist: create it (kubectl create namespace " + ns + ")"}
	case IsForbidden(err):
		return Check{"namespace", false, ns + ": not verifiable (no permission to create configmaps there)"}
	default:
		return Check{"namespace", false, ns + ": " + err.Error()}
	}
}

func qualified(group, res string) string {
	if group == "" {
		return res
	}
	return res + "." + group
}
