// Package podagent runs a stdio MCP server in a Kubernetes pod and
// connects the gateway to it: `mcpbox agent` in the pod (Run), Connect in
// the gateway, and the certificate authority (CA) that lets only the two
// of them talk.
//
// The gateway keeps one CA (LoadOrCreateCA, in its state directory) and
// issues every pod a short-lived server certificate naming
// POD.pod.mcpbox.internal (IssuePod); it dials pods with its own client
// certificate from the same CA (ClientTLS). The agent requires that client
// certificate in the TLS handshake — chained to the CA, allowed for
// client authentication, naming the gateway — so neither another pod (its
// certificate only serves) nor anyone holding another CA's certificate
// gets past the handshake; the gateway checks that the pod's certificate
// names the pod it means to reach, so a pod cannot pass for another.
//
// Nothing runs in the pod before the gateway's POST /v1/start, which
// carries the server's secrets (environment and files: StartRequest) and
// is accepted once; the secrets never appear in the pod's spec, so never
// in etcd, nor in the agent's own arguments or environment. Then /mcp
// speaks Streamable HTTP: a POST per message to the server, a call's
// response (and its progress) as server-sent events on its POST, and the
// server's other messages on an event stream the gateway holds open with
// GET. Messages pass through as written, so both protocol eras (up to
// 2025-11-25 with initialize, 2026-07-28 with _meta) work unchanged. Every
// message is bounded (Config.MaxMessage). The gateway trusts a pod no
// further than its certificate (its server may hold the pod's key and
// answer in the agent's place): Connect follows no redirect and reads no
// answer past the message limit.
//
// With a StartRequest.Proxy (a server with egress on the Kubernetes
// backend) the agent fronts the gateway's egress proxy for the server
// (egress.go): the server's proxy variables name a loopback listener of
// the agent's, with a random credential of its own, and the agent sends
// each connection's request on with the pod's token, which the server
// never holds. The gateway replaces the token before it ends (POST
// /v1/proxy-token, ConnectOptions.Renew), so the server keeps its egress
// however long it runs.
//
// The server's stderr reaches the pod's log with the start's secrets
// redacted (the node keeps that log, and who may read it need not be
// allowed the secrets).
//
// The agent exits when the server does, with its exit status, so the
// pod's phase shows it; on SIGTERM it closes the server's stdin, then
// signals it, each after a bounded grace. As a container's PID 1 (or
// with Config.Reap) it also reaps the orphans the server leaves. There is
// no unauthenticated endpoint: a readiness probe is a TCP probe of the
// listening port.
//
// `mcpbox agent --copy-to PATH` (CopySelf) is the init container of a pod
// whose image lacks the agent: the agent of another image copies its own
// executable into a volume the pod's other containers run it from.
//
// `mcpbox agent --trust-dir DIR` (WriteTrust) is the init container of a
// pod whose server has secrets added at the egress proxy: on the server's
// own image, it writes the image's system bundle (its links resolved
// inside the image) followed by the interception CA's certificate into
// DIR, which the server's container sees read-only over the system bundle
// paths (kube.PodOptions.TrustCA).
//
// The agent's side (Run, Main, CopySelf, WriteTrust: reaping, Pdeathsig,
// /proc/self/exe, openat2) is built for Linux, where pods run; the
// gateway's side (Connect, StartJob, the CA, ServerTLS) for every system
// the gateway runs on, macOS too, where Main refuses (ErrAgentNeedsLinux).
package podagent
