// Package credinject keeps secrets out of sandboxes: the sandbox holds a
// placeholder, and the egress proxy (package egress, through the
// egress.Injector that a Set implements) puts the real value into requests
// bound for the credential's own hosts only.
//
// # Placeholders
//
// New generates, per credential and per Set (one Set per sandbox), a
// placeholder from crypto/rand shaped like the value: the same length, a
// known token prefix (ghp_, sk-, xoxb-, AKIA, ...) or the value's leading
// run up to a first '_' or '-' kept, every other letter and digit replaced
// by a random one of its class (hex stays hex), punctuation kept; at least
// 64 random bits or New refuses the value as too short to mask. Shape
// "jwt" keeps the token's header and claim layout (iss, aud, exp, iat,
// nbf, scope, kid as they are; every other string claim randomized) with a
// random signature: clients that parse the token accept it, no verifier
// does. AWS credentials get a fake key id, secret and session token.
//
// # Substitution
//
// Only over TLS the proxy terminated, only to a host:port the credential
// lists (no port: 443; "*.suffix" for names below suffix): the configured
// header (rewritten to Format), query parameter (exactly the placeholder),
// Basic user or password, any header value (AnyHeader), and the body
// (Body; streamed, the placeholder having the value's length so framing is
// unchanged). A placeholder anywhere else in a request to its own host is
// left as it is. A placeholder of any credential in a request to a host it
// does not own (another credential's host included: no laundering; and
// plain HTTP) in the Host, URL (raw or percent-decoded), a header name or
// value (raw or Basic-decoded), a trailer or the body is refused with
// egress.ErrRefused and an "exfiltration" Event. Trailers are checked and
// substituted as headers are, when the body ends: a refusal fails the
// body's last read, so the request is aborted before its trailers leave. A body of declared length up to 64 KiB is
// checked whole before the request is sent; a longer or undeclared one
// streams, and its read fails before the placeholder's bytes are handed on
// (the server sees an aborted request, never the placeholder). Every
// substitution yields an "inject" Event (credential, host, port, where;
// never a value).
//
// # AWS SigV4
//
// A request to an AWS credential's host whose Authorization is
// AWS4-HMAC-SHA256 with the fake key id is verified with the fake secret
// (S3-style single and double path encoding are both tried; the one that
// matches is used again), its X-Amz-Security-Token replaced (or added, or
// removed) and signed again with the real pair. Presigned URLs, STREAMING-
// payload signatures and SigV4a (AWS4-ECDSA-P256-SHA256) are refused with
// a reason unless AWS.PassThrough; a bad signature, a foreign session token
// or a missing X-Amz-Date are refused always. Requests signed with another
// key id pass unchanged.
//
// # Responses
//
// Responses from an owning host have every credential's real value
// redacted (package redact: raw, hex, base64 in every alignment,
// percent-encoded and JSON-escaped forms, split across reads too) from
// header values, the body and trailers before the sandbox sees them; the
// body loses its Content-Length. An exact 4-gram prefilter lets windows
// with no form of any value skip the redactor's automaton (same output,
// fuzzed against Redactor.Bytes). A stream is passed on as it arrives but
// for bytes that may begin a form (as redact.Writer holds them): a stream
// pausing after a letter or digit that begins a form of a value, with the
// line breaks after it, delivers those bytes with the next ones (a JSON
// server-sent event, ending in "}", is not delayed). Requests ask for Accept-Encoding: identity; a
// compressed response is refused (502), since it could not be scanned.
// They ask for no range (Range and If-Range are removed) either: a part
// of a response can hold a part of a value, too short to be known, and a
// sandbox could read an echoed value a few bytes at a time. A part sent
// anyway (206) is refused. For the same reason a body that ends in the
// beginning of a form has it replaced by the mark if it is more than 7
// bytes or a quarter of the form (a host that cuts its echo short), as a
// WebSocket message's end below.
//
// # WebSocket
//
// A WebSocket handshake (HTTP/1.1) to an owning host is checked and
// substituted as any request and asks for no extension (compressed
// frames could not be scanned; a server that negotiates one anyway gets
// 502). After the 101 the proxy relays the connection through a frame
// parser both ways (websocket.go): the client's frames keep their
// headers and masks, their payloads scanned as bodies are — a placeholder
// of a credential that does not own the host (also cut across frames)
// ends the connection before the frame holding its end leaves, with a
// close frame (1008) to the client and an "exfiltration" Event, and an own
// one becomes the value with Body ("inject" Event, where "websocket").
// The server's messages have every value redacted: a message of up to 1
// MiB in one frame stays one frame, longer or fragmented ones are
// re-fragmented as they stream (RFC 6455 5.4 allows it without
// extensions); control frames are redacted whole. The data messages are
// scanned as one stream, so a value split across messages is caught: no
// message is held back for the next, so the end of a message that begins
// a form goes out as it is if it is at most 7 bytes and at most a quarter
// of the form (else it is replaced by the mark), and the form's rest in
// the next messages is replaced by the mark.
//
// # What it cannot do
//
// A placeholder inside an opaque CONNECT tunnel (a host no credential
// lists, or any SOCKS5 connection) is not seen; it is worthless there, and
// a listed host reached that way gets the placeholder and refuses it.
// Upgrades other than WebSocket over HTTP/1.1 do not work (the proxy
// drops hop-by-hop Upgrade); WebSocket over HTTP/2 (RFC 8441) is not
// offered. The value is not protected
// from the owning host itself, nor from a scheme the proxy does not
// rewrite (a client that derives a signature or MAC from the raw value
// other than SigV4 header signing cannot work with a placeholder). Values
// in compressed, encrypted or otherwise transformed response bodies beyond
// the redactor's forms are not caught; compressed ones are refused.
package credinject
