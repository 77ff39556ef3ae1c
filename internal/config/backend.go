package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Where servers run: on this host (the local sandbox) or as pods of a
// Kubernetes cluster.
//
//	backend:
//	  kind: kubernetes
//	  namespace: mcp
//	  kubeconfig: ~/.kube/config      # or in_cluster: true
//	  runtime_class: gvisor
//	  image_pull_secrets: [regcred]
//	  node_selector: {pool: mcp}
//	  tolerations: [{key: mcp, operator: Exists, effect: NoSchedule}]
//	  agent_image: registry/mcpbox-agent:1  # copies the agent into every pod
//	  agent_path: /mcpbox             # the mcpbox binary in agent_image (else in the image)
//	  image: registry/mcpbox-node:1   # a base image for command servers
//	  storage_class: standard         # per-agent output on a claim
//
// The top-level backend applies to every server; a server's own backend
// overrides the keys it sets (kind included).

// Backend kinds.
const (
	BackendLocal      = "local"
	BackendKubernetes = "kubernetes"
)

// Backend is where servers run. The zero value is the local sandbox.
type Backend struct {
	Kind             string // BackendLocal (also the meaning of empty) or BackendKubernetes
	Namespace        string
	Kubeconfig       string // a host path
	InCluster        bool   // the service account of the pod mcpbox runs in
	RuntimeClass     string
	ImagePullSecrets []string
	NodeSelector     []EnvVar // label → value, in file order
	Tolerations      []Toleration
	// AgentPath is where the mcpbox binary (the pod's agent) is in
	// AgentImage, or in the server's image when AgentImage is empty;
	// empty: /usr/local/bin/mcpbox.
	AgentPath string
	// AgentImage, if set, is an image holding the agent at AgentPath: an
	// init container copies it into every pod, so the server's image
	// need not contain mcpbox. Empty: the server's image must (a
	// server's agent_image: "" says its image does).
	AgentImage string
	// Image is the image a command or package server runs on (it holds
	// the agent and the command's runtime); an image server runs its own.
	Image string
	// StorageClass, if set, puts each agent's output on a
	// PersistentVolumeClaim of that class ("default": the cluster's
	// default), kept across idle stops; empty: an emptyDir.
	StorageClass string
	// GatewayCIDRs, if set, are where a gateway outside the cluster
	// connects from: the servers' NetworkPolicy admits them; empty: pods
	// labelled mcpbox.dev/role=gateway in the namespace.
	GatewayCIDRs []string
	// InputClaim, if set, is an existing PersistentVolumeClaim mounted
	// read-only at /workspace/input (a pod cannot mount a host path).
	InputClaim string
	// BaseImages are the images a package server's pod runs on, by
	// ecosystem ("npm"; "pypi" is not installed into pods yet): they
	// hold the package manager, its runtime and the agent. Unset:
	// DefaultBaseImages.
	BaseImages []EnvVar
	Meta       Meta
}

// DefaultBaseImages are the base images of package servers' pods when
// backend.base_images does not name one: the official Node.js image,
// pinned by tag (which the user pins by digest where it matters). It
// has no agent: backend.agent_image copies one in (or a derived image
// adds it at agent_path).
var DefaultBaseImages = map[string]string{"npm": "docker.io/library/node:22.12.0-bookworm-slim"}

// BaseImage is the base image of ecosystem eco ("npm") for b: its
// base_images entry, else the default; "" when there is none.
func (b Backend) BaseImage(eco string) string {
	for _, e := range b.BaseImages {
		if e.Name == eco {
			return e.Value
		}
	}
	return DefaultBaseImages[eco]
}

// Toleration is a pod toleration of node taints.
type Toleration struct {
	Key, Operator, Value, Effect string
	Meta                         Meta
}

// DefaultAgentPath is where the agent is in an image when agent_path is
// not set.
const DefaultAgentPath = "/usr/local/bin/mcpbox"

// BackendOf is the backend of server s: the top-level backend with the
// keys s's own sets over it.
func (c *Config) BackendOf(s *Server) Backend {
	b := c.Backend
	if s == nil || s.Backend == nil {
		return b
	}
	o := s.Backend
	set := func(key string, apply func()) {
		if o.Meta.Has(key) {
			apply()
		}
	}
	set("kind", func() { b.Kind = o.Kind })
	set("namespace", func() { b.Namespace = o.Namespace })
	set("kubeconfig", func() { b.Kubeconfig, b.InCluster = o.Kubeconfig, false })
	set("in_cluster", func() { b.InCluster = o.InCluster; b.Kubeconfig = "" })
	set("runtime_class", func() { b.RuntimeClass = o.RuntimeClass })
	set("image_pull_secrets", func() { b.ImagePullSecrets = o.ImagePullSecrets })
	set("node_selector", func() { b.NodeSelector = o.NodeSelector })
	set("tolerations", func() { b.Tolerations = o.Tolerations })
	set("agent_path", func() { b.AgentPath = o.AgentPath })
	set("agent_image", func() { b.AgentImage = o.AgentImage })
	set("image", func() { b.Image = o.Image })
	set("storage_class", func() { b.StorageClass = o.StorageClass })
	set("gateway_cidrs", func() { b.GatewayCIDRs = o.GatewayCIDRs })
	set("input_claim", func() { b.InputClaim = o.InputClaim })
	set("base_images", func() { b.BaseImages = o.BaseImages })
	return b
}

// IsKubernetes reports whether server s runs on the kubernetes backend.
func (c *Config) IsKubernetes(s *Server) bool { return c.BackendOf(s).Kind == BackendKubernetes }

func (d *decoder) backend(n *yaml.Node, path string, b *Backend) {
	d.mapping(n, path, &b.Meta, []field{
		{"kind", func(v *node, p string) { b.Kind = d.str(v, p) }},
		{"namespace", func(v *node, p string) { b.Namespace = d.str(v, p) }},
		{"kubeconfig", func(v *node, p string) { b.Kubeconfig = d.str(v, p) }},
		{"in_cluster", func(v *node, p string) { b.InCluster = d.boolean(v, p) }},
		{"runtime_class", func(v *node, p string) { b.RuntimeClass = d.str(v, p) }},
		{"image_pull_secrets", func(v *node, p string) {
			b.ImagePullSecrets = d.strs(v, p, &b.Meta, "image_pull_secrets", d.str)
		}},
		{"node_selector", func(v *node, p string) { b.NodeSelector = d.env(v, p) }},
		{"tolerations", func(v *node, p string) {
			b.Tolerations = []Toleration{}
			d.list(v, p, func(_ int, el *node, p string) {
				var t Toleration
				d.mapping(el, p, &t.Meta, []field{
					{"key", func(v *node, p string) { t.Key = d.str(v, p) }},
					{"operator", func(v *node, p string) { t.Operator = d.str(v, p) }},
					{"value", func(v *node, p string) { t.Value = d.str(v, p) }},
					{"effect", func(v *node, p string) { t.Effect = d.str(v, p) }},
				})
				b.Tolerations = append(b.Tolerations, t)
			})
		}},
		{"agent_path", func(v *node, p string) { b.AgentPath = d.str(v, p) }},
		{"agent_image", func(v *node, p string) { b.AgentImage = d.str(v, p) }},
		{"image", func(v *node, p string) { b.Image = d.str(v, p) }},
		{"storage_class", func(v *node, p string) { b.StorageClass = d.str(v, p) }},
		{"gateway_cidrs", func(v *node, p string) { b.GatewayCIDRs = d.strs(v, p, &b.Meta, "gateway_cidrs", d.str) }},
		{"input_claim", func(v *node, p string) { b.InputClaim = d.str(v, p) }},
		{"base_images", func(v *node, p string) { b.BaseImages = d.env(v, p) }},
	})
}

func backendNode(b *Backend) *yaml.Node {
	m := mapNode()
	addStr(m, "kind", b.Kind)
	addStr(m, "namespace", b.Namespace)
	addStr(m, "kubeconfig", b.Kubeconfig)
	addBool(m, "in_cluster", b.InCluster)
	addStr(m, "runtime_class", b.RuntimeClass)
	addStrs(m, "image_pull_secrets", b.ImagePullSecrets)
	addEnvVars(m, "node_selector", b.NodeSelector)
	if b.Tolerations != nil {
		l := listNode(false)
		for _, t := range b.Tolerations {
			tm := mapNode()
			addStr(tm, "key", t.Key)
			addStr(tm, "operator", t.Operator)
			addStr(tm, "value", t.Value)
			addStr(tm, "effect", t.Effect)
			l.Content = append(l.Content, flowIfEmpty(tm))
		}
		addKV(m, "tolerations", flowIfEmpty(l))
	}
	addStr(m, "agent_path", b.AgentPath)
	addStr(m, "agent_image", b.AgentImage)
	addStr(m, "image", b.Image)
	addStr(m, "storage_class", b.StorageClass)
	addStrs(m, "gateway_cidrs", b.GatewayCIDRs)
	addStr(m, "input_claim", b.InputClaim)
	addEnvVars(m, "base_images", b.BaseImages)
	return m
}

// dnsLabel and dnsSubdomain are the Kubernetes name syntaxes. Compiled on
// first use (lazyRegexp): the bounded repetitions make large programs.
var (
	dnsLabel     = lazyRegexp(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsSubdomain = lazyRegexp(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	labelKey     = lazyRegexp(`^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelVal     = lazyRegexp(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
)

// checkBackend checks one backend mapping (p: its path) on its own.
func checkBackend(r *collector, b *Backend, p string) {
	at := b.Meta.At
	switch b.Kind {
	case "", BackendLocal, BackendKubernetes:
	default:
		r.errorf(at("kind"), "%s.kind: %q: want local or kubernetes", p, b.Kind)
	}
	if b.Kind != BackendKubernetes {
		for _, key := range []string{"namespace", "kubeconfig", "in_cluster", "runtime_class", "image_pull_secrets",
			"node_selector", "tolerations", "agent_path", "agent_image", "image", "storage_class", "gateway_cidrs", "input_claim", "base_images"} {
			if b.Meta.Has(key) && b.Meta.Has("kind") {
				r.errorf(at(key), "%s.%s: only applies to kind: kubernetes", p, key)
			}
		}
	}
	if b.Meta.Has("namespace") && !dnsLabel().MatchString(b.Namespace) {
		r.errorf(at("namespace"), "%s.namespace: %q is not a namespace name (lowercase letters, digits and '-', at most 63)", p, b.Namespace)
	}
	if b.Kubeconfig != "" && b.InCluster {
		r.errorf(at("in_cluster"), "%s: kubeconfig and in_cluster: true are exclusive", p)
	}
	if b.Meta.Has("kubeconfig") {
		hostPath(r, at("kubeconfig"), p+".kubeconfig", b.Kubeconfig)
	}
	if b.Meta.Has("runtime_class") && !dnsSubdomain().MatchString(b.RuntimeClass) {
		r.errorf(at("runtime_class"), "%s.runtime_class: %q is not a RuntimeClass name", p, b.RuntimeClass)
	}
	for i, s := range b.ImagePullSecrets {
		if !dnsSubdomain().MatchString(s) {
			r.errorf(b.Meta.Elem("image_pull_secrets", i), "%s.image_pull_secrets[%d]: %q is not a Secret name", p, i, s)
		}
	}
	for _, e := range b.NodeSelector {
		if !labelKey().MatchString(e.Name) || !labelVal().MatchString(e.Value) {
			r.errorf(e.Pos, "%s.node_selector: %q: %q is not a label and value", p, e.Name, e.Value)
		}
	}
	for i, t := range b.Tolerations {
		tp := fmt.Sprintf("%s.tolerations[%d]", p, i)
		switch t.Operator {
		case "", "Equal":
		case "Exists":
			if t.Value != "" {
				r.errorf(t.Meta.At("value"), "%s: operator Exists takes no value", tp)
			}
		default:
			r.errorf(t.Meta.At("operator"), "%s.operator: %q: want Equal or Exists", tp, t.Operator)
		}
		switch t.Effect {
		case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			r.errorf(t.Meta.At("effect"), "%s.effect: %q: want NoSchedule, PreferNoSchedule or NoExecute", tp, t.Effect)
		}
		if t.Key == "" && t.Operator != "Exists" {
			r.errorf(t.Meta.Pos, "%s: a toleration without a key needs operator: Exists", tp)
		}
	}
	if b.Meta.Has("agent_path") && !strings.HasPrefix(b.AgentPath, "/") {
		r.errorf(at("agent_path"), "%s.agent_path: %q: want an absolute path in the image", p, b.AgentPath)
	}
	if b.Meta.Has("image") {
		if err := checkImageRef(b.Image); err != nil {
			r.errorf(at("image"), "%s.image: %v", p, err)
		}
	}
	if b.AgentImage != "" { // "": the image has the agent (a server's override)
		if err := checkImageRef(b.AgentImage); err != nil {
			r.errorf(at("agent_image"), "%s.agent_image: %v", p, err)
		}
	}
	for i, cidr := range b.GatewayCIDRs {
		if pfx, err := netip.ParsePrefix(cidr); err != nil || pfx.Masked() != pfx {
			r.errorf(b.Meta.Elem("gateway_cidrs", i), "%s.gateway_cidrs[%d]: %q: want a CIDR such as 10.1.2.0/24", p, i, cidr)
		}
	}
	if b.Meta.Has("input_claim") && !dnsSubdomain().MatchString(b.InputClaim) {
		r.errorf(at("input_claim"), "%s.input_claim: %q is not a PersistentVolumeClaim name", p, b.InputClaim)
	}
	for _, e := range b.BaseImages {
		switch e.Name {
		case "npm", "pypi":
		default:
			r.errorf(e.Pos, "%s.base_images: %q: want npm or pypi", p, e.Name)
			continue
		}
		if err := checkImageRef(e.Value); err != nil {
			r.errorf(e.Pos, "%s.base_images.%s: %v", p, e.Name, err)
		}
	}
	if b.Meta.Has("storage_class") && b.StorageClass != "default" && !dnsSubdomain().MatchString(b.StorageClass) {
		r.errorf(at("storage_class"), "%s.storage_class: %q is not a StorageClass name (or default)", p, b.StorageClass)
	}
}

// checkBackends checks every backend mapping, then what the kubernetes
// backend cannot do for a server: it fails closed at load rather than
// run a server without what its config asks for.
func checkBackends(r *collector, c *Config) {
	checkBackend(r, &c.Backend, "backend")
	for _, s := range c.Servers {
		if s == nil {
			continue
		}
		p := "servers." + s.Name
		if s.Backend != nil {
			checkBackend(r, s.Backend, p+".backend")
		}
		b := c.BackendOf(s)
		if b.Kind != BackendKubernetes || s.URL != "" {
			checkNoKubeSecrets(r, s, p)
		}
		if b.Kind != BackendKubernetes {
			continue
		}
		at := s.Meta.Pos
		if s.Backend != nil {
			at = s.Backend.Meta.Pos
		}
		if s.URL != "" {
			if s.Backend != nil && s.Backend.Meta.Has("kind") {
				r.errorf(s.Backend.Meta.At("kind"), "%s.backend: a url server runs elsewhere already; kind: kubernetes does not apply", p)
			}
			continue
		}
		checkKubeServer(r, s, b, p, at)
	}
}

// checkNoKubeSecrets refuses kubernetes: references of a server that
// runs no pod: no namespace to read the Secret in, and no Role that
// allows it.
func checkNoKubeSecrets(r *collector, s *Server, p string) {
	where := "on this host"
	if s.URL != "" {
		where = "elsewhere (url)"
	}
	for _, sec := range s.Secrets {
		if _, ok, _ := ParseKubeSecretRef(sec.From); ok {
			r.errorf(sec.Meta.At("from"), "%s.secrets.%s.from: a kubernetes: Secret is read only for a server on backend kind: kubernetes (this one runs %s)", p, sec.Name, where)
		}
	}
}

// KubeSecretRefs are the kubernetes: references of the servers whose pods
// run in namespace ns, sorted and without repeats: the Secrets the
// gateway reads there (its Role's get, doctor's checks).
func (c *Config) KubeSecretRefs(ns string) []KubeSecretRef {
	var out []KubeSecretRef
	for _, s := range c.Servers {
		if s == nil || s.URL != "" || !c.IsKubernetes(s) || c.BackendOf(s).Namespace != ns {
			continue
		}
		for _, sec := range s.Secrets {
			if r, ok, err := ParseKubeSecretRef(sec.From); ok && err == nil && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b KubeSecretRef) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func checkKubeServer(r *collector, s *Server, b Backend, p string, at Pos) {
	bad := func(pos Pos, format string, args ...any) {
		r.errorf(pos, "%s: "+format+" (backend kind: kubernetes)", append([]any{p}, args...)...)
	}
	switch {
	case b.Namespace == "":
		bad(at, "no backend.namespace")
	case b.Kubeconfig == "" && !b.InCluster:
		bad(at, "backend needs kubeconfig: FILE or in_cluster: true")
	}
	switch {
	case s.Builtin != "":
		bad(s.Meta.At("builtin"), "the built-in server runs on this host only; give it backend: {kind: local}")
	case s.Package != "" && !strings.HasPrefix(s.Package, "npm:"):
		bad(s.Meta.At("package"), "only npm packages are installed into pods; build an image with the package and use image:")
	case s.Package != "":
		// The pod's base image: backend.base_images.npm or the default.
	case s.Image.Ref == "" && b.Image == "":
		bad(at, "a command server needs backend.image (a base image with the agent and the command's runtime)")
	case s.Image.Ref != "" && len(s.Args) == 0:
		bad(s.Meta.At("image"), "an image server needs args: the whole command (the agent cannot read the image's entrypoint)")
	}
	if strings.HasPrefix(s.Placement, PlacementGroup) {
		bad(s.Meta.At("placement"), "groups share a local sandbox; a pod runs one server")
	}
	if in := s.Filesystem.Input; in != nil {
		bad(s.Filesystem.Meta.At("input"), "filesystem.input is a host directory, which a pod cannot mount")
	}
	if s.Filesystem.Mounts != nil {
		bad(s.Filesystem.Meta.At("mounts"), "filesystem.mounts are host directories, which a pod cannot mount")
	}
	if s.Filesystem.Template != "" {
		bad(s.Filesystem.Meta.At("template"), "filesystem.template is not applied in pods")
	}
	if s.Filesystem.Output != nil && s.Filesystem.Output.Source != "" {
		bad(s.Filesystem.Output.Meta.At("source"), "filesystem.output.source is a host directory, which a pod cannot mount")
	}
	if len(s.Network.Forward) > 0 {
		// network.egress goes through the gateway's egress proxy
		// Deployment; a forward's fixed port inside the sandbox has no
		// pod counterpart.
		bad(s.Network.Meta.At("forward"), "network.forward is the local sandbox's; a pod reaches hosts through network.egress and the proxy")
	}
	if s.Artifacts != nil {
		bad(s.Artifacts.Meta.Pos, "artifacts are not exported from pods yet")
	}
	if s.Exec.Allow != nil || s.Exec.Writable {
		bad(s.Exec.Meta.Pos, "exec: the pod's root is read-only and /tmp is an emptyDir; exec rules are the local sandbox's")
	}
}
