// Package egressproxy is the egress proxy of a gateway's Kubernetes pods:
// `mcpbox egress-proxy`, run as a Deployment behind a Service, enforcing
// each server's egress allowlist by the identity of the pod that asks.
//
// # Identity
//
// Pods share the proxy, and a pod's source address is not a reliable
// name for it (network plugins may masquerade; addresses are reused), so
// each pod proves who it is with a token: at start the gateway hands the
// pod's agent, over its mutual-TLS start request (never in the pod's
// spec, so never in etcd), the proxy's address and a token
// (podagent.Proxy); the agent fronts the proxy for its server on
// loopback and adds Proxy-Authorization: Basic POD:TOKEN to each request
// it relays, so the server never holds the token. TOKEN is Sign's
// HMAC-SHA256, under a key only the gateway and the proxy hold, over the
// pod's name, its server and an expiry. The gateway sends the agent a
// new token before the last one ends, and the agent presents it at once
// with a CONNECT to podagent.ProxyRenewTarget (answered 204, never
// dialed, not logged: egress.Options.RenewTarget), so that the pod's
// proxy and its open connections live until the newest token's end,
// however long the pod runs, and a token taken from a pod still ends.
// ProxyEnv (the token in the variables themselves) is for a run-once
// job's short token: a package install. The proxy requires
// Proxy-Authorization: Basic on every CONNECT and plain-HTTP request
// (egress.Options.Authorize), checks the HMAC in constant time and the
// expiry (Verify), and hands the request to the pod's own egress.Proxy,
// built from that server's rules and limits: so a token opens its
// server's allowlist and nothing else, and each pod's connections count
// against its own limits and byte budget as a local sandbox's do. A
// missing, forged, expired or foreign-keyed token is refused with 407; a
// target outside the server's allowlist with 403. Options.PodOf, where
// the deployment can map a source address to a pod, adds a second check:
// the address must belong to the token's pod.
//
// # Decisions
//
// Decisions are package egress's: metadata, link-local, loopback,
// private, CGNAT and the other internal ranges are refused unless the
// server's rules name them, so a cluster's pod and service ranges (which
// are private ranges) are refused as on a local host; names are resolved
// by the proxy and dialed by the checked address.
//
// # Secrets added at the proxy
//
// A server's secrets.NAME.inject work through the shared proxy as
// through a local sandbox's (package credinject): the pod holds
// placeholders, and its egress.Proxy here intercepts the secrets' hosts
// with its credinject.Set. The real values, the placeholders the gateway
// gave the pod and the interception CA's key never go into Config (the
// Secret, so etcd) or a pod's spec: the gateway sends them as a State
// (register.go) to each replica's registration port (DefaultRegistryPort)
// over mutual TLS (podagent.ServerTLS: a certificate from the gateway's
// pod CA, and only the gateway's client certificate accepted), and the
// replica holds them in memory. Config carries only each server's secret
// hosts (ServerPolicy.Inject), so that a replica with no Registration of
// a pod (it restarted; the gateway sends the State again every
// ResendEvery) refuses the pod those hosts (egress.Options.Refuse) rather
// than tunnel the placeholder. Each substitution and refusal is a Line
// of Kind KindSecret, audited by the gateway as a local one.
//
// # Configuration and log
//
// The proxy reads Config (the key and each server's rules and limits) as
// JSON from a file, the Secret the gateway creates and mounts into the
// proxy's pods (ConfigSecret, owned by the gateway's owner object), and
// reads it again when it changes (a new allowlist closes the pods'
// proxies of the servers it changed). Each connection yields one JSON
// line on stdout (Line): time, server, pod, target, address dialed,
// decision, rule or reason, bytes; `kubectl logs` or the gateway reads
// them, and the pod name joins a line to the audit's record of the pod.
package egressproxy
