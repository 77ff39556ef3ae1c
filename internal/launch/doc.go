// Package launch holds the backends that start a configured server for a
// scope: Local runs it in a sandbox on this host (from a warm pool of
// prepared sandboxes with LocalOptions.WarmPool), Remote connects to a
// remote Streamable HTTP server (or, with transport sse or auto, one of
// the 2024-11-05 HTTP+SSE transport), Kube runs it as a pod of a Kubernetes
// cluster (internal/kube) reached through the mcpbox agent in the pod,
// and Group runs the servers of one group
// in one sandbox under internal/group's supervisor. The gateway reaches a
// backend through gateway.Server's Launch (On) and Release.
//
// A Local start runs named steps (secrets with the start's context, the
// redacting stderr writer, egress logging, the per-scope workspace and
// input overlay, sandbox.Start), each registering its undo before the
// next; the instance it returns accounts for the sandbox's end (status,
// artifacts) and tells the Observer.
//
// It must not decide about calls or audit them: the guard plugs in as the
// Observer, so this package imports no guard, cli, admin or daemon. It is
// layer 3 (internal/conventions/layers_test.go): it imports gateway (for
// its types), sandbox, specconv, workspace, track, instance (the overlay
// lock), group, secrets, redact, egress, cgroup (stats), audit (event
// names), config and kube.
package launch
