// Package dashboard is the web page of a running `mcpbox serve`, an
// http.Handler for /ui/ on the gateway's HTTP listener: pending approvals
// (decided from the page), the audit trail of calls with filters and each
// call's full record, the sandboxes (their calls in hand; pause, resume,
// stop, the workspace diff and its patch), egress allowed and refused per server, integrity
// (changed definitions side by side, scanner findings, trust), and the
// servers. Live updates come over server-sent events from Events, which
// FollowAudit feeds with the audit records as they are committed.
//
// It acts only through admin.Backend, the same back-end the admin socket
// uses, and reads the trail through the audit store's read methods: it
// decides nothing about calls, approvals or sandboxes itself.
//
// # Threats
//
// The page holds the power to approve calls and stop sandboxes, and it
// shows what servers and workloads wrote, so:
//
//   - Authentication: a session starts only from a secret the serve
//     accepts (the login form, Options.Authenticate: mcpbox's own
//     dashboard secret, never a token client configs hold unless the
//     config gives that client a role) or a one-time login URL
//     (LoginURL: signed with a key the CLI and the serve share, single
//     use, expiring within MaxLoginTTL). The session cookie is HttpOnly,
//     SameSite=Strict, Path=/ui/, Secure on TLS listeners; sessions live
//     in memory and end at logout, expiry or restart.
//   - Other ports of the host: browsers send the cookie to every port of
//     127.0.0.1, another local user's web server included. So every API
//     request, reads too, also needs the session's key (X-CSRF-Token,
//     never in an address, which history and logs keep: the page fetches
//     the event stream and the patch download too), which the login hands
//     the page in its URL's fragment and the page keeps in its origin's
//     storage (pageAfterLogin): the cookie alone reads and decides nothing.
//   - Cross-site requests: a form cannot send that header and a
//     cross-origin script cannot read the key; every state-changing
//     request also needs an Origin header naming this very host; login
//     forms need the Origin too.
//   - DNS rebinding: every request's Host must be a loopback name or one
//     of Options.Hosts; anything else is refused before routing.
//   - Injection: every asset is embedded (go:embed), there is no inline
//     script or style and the Content-Security-Policy is default-src
//     'self' with no unsafe-inline; the script inserts every string the
//     server sends with textContent, never as markup, so a tool name or
//     argument like <img onerror=...> shows as text.
//   - Roles: a viewer session reads what the page shows but every action
//     answers 403, and so does a workspace diff (file contents, not
//     redacted: for the operator, as `mcpbox diff` is).
//   - Secrets: the page shows only what already passed the redactor
//     (approval requests, audit records, pin diffs); it reads no file but
//     a sandbox's overlay diff, which the admin socket's diff shows too.
//
// It must not import internal/cli, internal/guard or internal/gateway.
package dashboard
