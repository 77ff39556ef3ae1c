// Package kube is a small Kubernetes API client and the objects mcpbox
// creates for its Kubernetes backend.
//
// The client (client.go) speaks the API's REST over net/http with the
// credentials of a kubeconfig file or of a pod's service account; the
// objects are the types of k8s.io/api, so no client-go. The builders
// (objects.go) make every object hardened by default: a server's Pod runs
// as a non-root user with a read-only root, no capabilities, no privilege
// escalation, the runtime's seccomp profile and no service-account token;
// its NetworkPolicy denies all egress but the egress proxy and all ingress
// but the gateway. Every object carries mcpbox's labels and an owner
// reference to one per-gateway ConfigMap, so deleting that ConfigMap lets
// the garbage collector remove everything; a Lease per gateway tells a
// later gateway which owners belong to gateways that died (gc.go).
// SecretKey (secret.go) reads one key of an existing Secret, for a
// server secret given as kubernetes:SECRET/KEY; the Role (rbac.go) grants
// that get by name only. A pod whose image lacks the agent gets it from
// an init container on another image (AgentCopy, agent.go:
// backend.agent_image). A pod whose server has secrets added at the
// egress proxy gets a trust init container (trust.go) that puts its
// image's bundle with the proxy's CA read-only over the system bundle
// paths.
//
// It is a leaf of layer 0 (internal/conventions/layers_test.go): it knows
// nothing of mcpbox's config or gateway; internal/launch's Kube backend
// uses it.
package kube
