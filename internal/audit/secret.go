package audit

// Events of secrets added at the egress proxy (config secrets.NAME.inject):
// Detail holds "secret", "host", "port", "where" and, for a refusal,
// "reason"; never a value.
const (
	// EventSecretInject: the proxy added the real value to a request.
	EventSecretInject = "secret_inject"
	// EventSecretExfiltration: a placeholder went to a host that is not
	// its secret's; the request was refused.
	EventSecretExfiltration = "secret_exfiltration"
	// EventSecretRefused: a request the secret cannot serve (a presigned
	// URL, a streaming SigV4 payload, ...) was refused.
	EventSecretRefused = "secret_refused"
)
