// Package egress is the host-side egress proxy of mcpbox sandboxes. A
// sandbox has an empty network namespace; its only way out is a unix socket
// of its own on which a Proxy serves, so the proxy knows which sandbox and
// policy is asking. (The sandbox side listens on 127.0.0.1:3128 inside the
// sandbox and hands each connection to that socket; that is package
// sandbox's job.)
//
// # Protocols
//
// One connection carries one of: an HTTP CONNECT request (any TCP, usually
// TLS); one absolute-form plain HTTP request (GET http://host/path), which
// is forwarded in origin form without hop-by-hop headers and answered with
// Connection: close; or a SOCKS5 CONNECT (no authentication; IPv4, IPv6 and
// domain addresses), recognized by its first byte 0x05. Denials answer 403
// (or SOCKS reply 0x02) with a short reason; malformed, oversized (request
// head over 64 KiB) or slow (Limits.HeaderTimeout) requests get 400, 431 or
// 408 and are closed.
//
// # Relay
//
// A tunnel (CONNECT, SOCKS, forward) between two stream sockets, and a
// plain-HTTP response body framed by Content-Length or by the end of the
// connection, move by splice(2) through a pooled pipe: the bytes never
// enter this process, and counts and deadlines apply per chunk as they
// do to copies. Byte limits are exact on either path: each transfer
// reserves its grant of the budget before it moves a byte (a splice for
// one non-blocking call), so concurrent directions and connections never
// spend the same remainder twice. Elsewhere (another platform, a chunked body,
// an intercepted connection) bytes are copied.
//
// # Hand-over
//
// On a unix socket a client may instead pass a connection (with
// package handover, which the sandbox init sends with: it links no
// net/http): a message "\x00FD1 " TARGET "\n" of at most 512 bytes
// carrying exactly one descriptor (SCM_RIGHTS), a connected TCP socket.
// The proxy then serves that socket as the client in place of the unix
// connection, with the same parsing, decisions, limits and Event; with a TARGET (a forward's
// host:port) as a CONNECT to it that sends no reply. The sandbox init
// hands over every connection it accepts, so the bytes go from the
// upstream to the workload's socket by one splice and the init is out of
// the path. Only that init may: a hand-over on a unix connection whose
// peer (SO_PEERCRED) is not Options.HandoverPID is refused unread, its
// descriptors never entering the proxy. A workload's own socket would
// share its open file description with the proxy, which the workload
// could then make blocking (O_NONBLOCK is the description's, and a
// blocking read(2) is past every deadline), linger on close or read from;
// the sockets the init accepts no workload holds. The socket is the
// sandbox's to write to: a message that is not exactly that (more or fewer descriptors, a descriptor that is not a
// connected AF_INET/AF_INET6 SOCK_STREAM TCP socket, a listener, a
// malformed or oversized message, none within Limits.HeaderTimeout) is
// refused with a deny Event and closed with every descriptor it carried
// (handover_linux.go). A hand-over is read in the connection's own
// goroutine, never the accept loop's, and counts against MaxConns like
// any connection. A front proxy (Options.Authorize) takes none.
//
// # Shared proxies
//
// Where clients cannot each have a socket of their own (pods of a
// Kubernetes cluster reach one proxy Service), Options.Authorize makes a
// front proxy that tells them apart by credentials: every HTTP request must
// carry Proxy-Authorization: Basic (else 407), and Authorize maps its user
// and password to the client's own Proxy, whose rules, limits and log then
// decide and carry the connection as if it had been accepted there (its
// MaxConns and byte totals count it; its Close ends it). The credentials
// are never forwarded. SOCKS, which has none here, is refused.
//
// # Interception
//
// With Options.Injector (and Options.CA) set, a CONNECT to a target the
// Injector names is not tunnelled: once allowed and dialed, the proxy
// answers 200, completes the client's TLS with a certificate for the
// CONNECT host minted by the CA (cached per host; the CA key stays in this
// process, only its certificate is meant for the sandbox's trust bundle),
// and serves HTTP/1.1 or HTTP/2 (ALPN) on it. Each request must name the
// CONNECT target in its Host (else 403: no domain fronting into another
// virtual host), is shown to Injector.Request, and is sent over a new TLS
// connection to the dialed address that verifies the server's certificate
// for the host against Options.RootCAs or the host's trust store (else
// 502). The upstream speaks the client's protocol, as through a tunnel:
// HTTP/1.1 for an HTTP/1.1 client, HTTP/2 for an HTTP/2 client when the
// server offers it. An HTTP/1.1 response body is relayed in pieces of up
// to 256 KiB (read and written on two goroutines) with the client's
// connection corked, so its TLS records leave 16 to a system call. Request and
// response framing is redone by net/http, so a body the Injector rewrites
// keeps correct Content-Length, chunked or DATA-frame framing; request
// trailers are forwarded (and shown to the Injector's body at its end). A
// WebSocket handshake (HTTP/1.1 Upgrade) goes upstream over an HTTP/1.1
// connection; on 101 the client's connection is taken over and relayed
// both ways through the body the Injector's filter left (upgrade.go),
// until either side ends. Plain-HTTP requests are shown to
// Injector.Request too. Every other CONNECT is an
// opaque tunnel as before, so pinned-certificate clients keep working.
//
// # Decisions
//
// A target is allowed when a Rule matches its host and port, or it is
// exactly a Forward's To. Host names are resolved by the proxy through
// Options.Resolver; every address is checked and the dial goes to a checked
// address, never to the name again, so DNS rebinding between check and use
// is impossible. One blocked address refuses the target. Blocked, unless a
// rule names the address (a Rule whose Host is that IP, or whose CIDR
// covers it, or a Forward): loopback, RFC 1918, CGNAT, link-local (with the
// 169.254.169.254 metadata service), ULA, site-local, multicast,
// unspecified, broadcast, 0.0.0.0/8, reserved, documentation and
// benchmarking ranges, and the IPv6 forms that embed a blocked IPv4 address
// (IPv4-mapped, NAT64, 6to4; all IPv4-compatible ::/96 and Teredo are
// refused). Cloud metadata host names (metadata.google.internal, ...) are
// refused unless a rule names them exactly.
//
// An IP-literal target is its IP. A host whose last label is numeric is an
// IPv4 address in inet_aton syntax, as curl and browsers read it
// (2130706433, 0177.0.0.1 and 0x7f.1 are all 127.0.0.1) and is judged as
// that address; if it does not parse as one, it is refused, never resolved.
// Rules and forwards must spell IPv4 addresses canonically.
//
// # Log
//
// Every connection yields one Event through Options.Log after it ended:
// target, dialed IP, decision and rule or reason, bytes, duration. For
// package registries (npm, PyPI, the Go module proxy, crates.io) the package
// name and version are extracted from plain-HTTP request paths. Under
// CONNECT the proxy sees only the host name the client asked for, not the
// path, so downloads over TLS are logged by host alone.
//
// # Threat model
//
// The proxy stands between untrusted code in a sandbox and the host's
// network. It enforces which hosts and ports are reachable and that no
// allowed name leads to an internal address. It terminates TLS only for
// the targets an Injector names (see Interception); elsewhere, under
// CONNECT it sees the requested host and port and the byte counts,
// never URLs, headers or bodies, and a TLS client may send a different SNI
// or Host inside the tunnel to a server that hosts several names (domain
// fronting), so allowing a shared front end (a CDN) allows what it fronts.
// Allowed hosts can carry data out; the byte limits bound how much. The
// sandbox has no route out and no resolver but the sandbox init's, which
// forwards no lookup: it gives each name an address of its own and hands
// connections to it here as a CONNECT to the name (a hand-over with a
// target), so programs that ignore the proxy settings are decided as
// CONNECTs. Names are resolved only here, by the host's resolver, for
// names a rule allows. With an exact-name rule no
// chosen name reaches a resolver; with "*.suffix" or "*" the sandbox
// chooses names below the suffix (or any), and their lookups reach that
// suffix's name servers even when the connection is then refused: DNS
// exfiltration is closed only as far as the rules are exact.
package egress
