package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// This file holds the syntax of single values: names, secret references,
// hosts, ports and addresses. It parses text only (net/netip, net/url);
// nothing here resolves or connects.

// The regexps compile on first use: the sandbox init is this binary too,
// and every package-level initializer costs each sandbox start.
var (
	// nameRE is the syntax of server, group and client names.
	nameRE = lazyRegexp(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	// secretNameRE keeps secret names usable both as env var and file name.
	secretNameRE = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*$`)
	envVarRE     = secretNameRE
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// SecretRef is a parsed secret reference: where a value comes from, never
// the value.
type SecretRef struct {
	Scheme string // "env", "file" or "cmd"
	Arg    string // variable name, path (as written) or shell command
}

// ParseSecretRef parses "env:VAR", "file:PATH" or "cmd:COMMAND". Its errors
// never repeat a string that is not a reference, since that may be a
// pasted secret.
func ParseSecretRef(ref string) (SecretRef, error) {
	scheme, arg, ok := strings.Cut(ref, ":")
	if ok && scheme == SchemeKubernetes {
		return SecretRef{}, fmt.Errorf("kubernetes: a Secret of the cluster is read only for a server secret on the kubernetes backend")
	}
	if !ok || (scheme != "env" && scheme != "file" && scheme != "cmd") {
		return SecretRef{}, fmt.Errorf("must be a reference (env:VAR, file:PATH or cmd:COMMAND), not a literal secret value")
	}
	switch {
	case strings.ContainsRune(arg, 0):
		return SecretRef{}, fmt.Errorf("%s: reference must not contain NUL", scheme)
	case strings.TrimSpace(arg) == "":
		return SecretRef{}, fmt.Errorf("%s: reference names nothing", scheme)
	case scheme == "env" && !envVarRE().MatchString(arg):
		return SecretRef{}, fmt.Errorf("env: %q is not a valid variable name", arg)
	}
	return SecretRef{Scheme: scheme, Arg: arg}, nil
}

// SchemeKubernetes is the scheme of a key of an existing Kubernetes
// Secret, "kubernetes:SECRET/KEY", in the server's backend namespace.
// The gateway reads it through the API at each start (it must know the
// value to redact it), so only a secret of a server on the kubernetes
// backend may use it; ParseSecretRef refuses it everywhere else.
const SchemeKubernetes = "kubernetes"

// KubeSecretRef is a parsed kubernetes:SECRET/KEY reference.
type KubeSecretRef struct {
	Secret string // the Secret's name, a DNS subdomain
	Key    string // a key of its data
}

// String is the reference as written.
func (r KubeSecretRef) String() string { return SchemeKubernetes + ":" + r.Secret + "/" + r.Key }

// kubeKeyRE is the syntax of a key of a Secret's data.
var kubeKeyRE = lazyRegexp(`^[-._a-zA-Z0-9]{1,253}$`)

// ParseKubeSecretRef parses "kubernetes:SECRET/KEY". ok reports whether
// ref is of that scheme at all; err, whether it is well formed.
func ParseKubeSecretRef(ref string) (r KubeSecretRef, ok bool, err error) {
	arg, ok := strings.CutPrefix(ref, SchemeKubernetes+":")
	if !ok {
		return KubeSecretRef{}, false, nil
	}
	name, key, found := strings.Cut(arg, "/")
	switch {
	case !found:
		return KubeSecretRef{}, true, fmt.Errorf("kubernetes: want kubernetes:SECRET/KEY (a Secret in the server's backend namespace and a key of its data)")
	case !dnsSubdomain().MatchString(name):
		return KubeSecretRef{}, true, fmt.Errorf("kubernetes: %q is not a Secret name (lowercase letters, digits, '-' and '.')", name)
	case !kubeKeyRE().MatchString(key) || key == "." || key == "..":
		return KubeSecretRef{}, true, fmt.Errorf("kubernetes: %q is not a key of a Secret (letters, digits, '-', '_' and '.')", key)
	}
	return KubeSecretRef{Secret: name, Key: key}, true, nil
}

// validHostname reports whether s is a DNS name: dot-separated labels of
// letters, digits and inner hyphens, not all-numeric at the end (that would
// be a mangled IP address), without a trailing dot.
func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	_, err := strconv.Atoi(labels[len(labels)-1])
	return err != nil
}

func isIP(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == ""
}

// IsLoopbackHost reports whether host h names this machine: localhost
// or a loopback address.
func IsLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// SplitHostPort splits "host:port" or "[v6]:port" (an IPv6 address
// needs its brackets).
func SplitHostPort(s string) (host, port string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 || !strings.HasPrefix(s[end+1:], ":") {
			return "", "", fmt.Errorf("%q is not [IPv6]:PORT", s)
		}
		return s[1:end], s[end+2:], nil
	}
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return "", "", fmt.Errorf("%q is not HOST:PORT", s)
	}
	if strings.Contains(s[:i], ":") {
		return "", "", fmt.Errorf("%q: write IPv6 addresses as [ADDR]:PORT", s)
	}
	return s[:i], s[i+1:], nil
}

// parsePort parses a decimal port in [min, 65535].
func parsePort(s string, min int) (int, bool) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, _ := strconv.Atoi(s)
	return n, n >= min && n <= 65535
}

// checkURL checks a remote server's URL. Plain http is only for loopback,
// and credentials belong in secrets, not in the URL.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("invalid URL (want https://HOST/PATH)")
	}
	switch {
	case u.User != nil:
		return fmt.Errorf("must not contain credentials; use secrets")
	case u.Scheme == "https":
	case u.Scheme == "http" && IsLoopbackHost(u.Hostname()):
	case u.Scheme == "http":
		return fmt.Errorf("plain http is only allowed to a loopback host; use https")
	default:
		return fmt.Errorf("unsupported scheme %q (want https)", u.Scheme)
	}
	return nil
}

// checkOrigin checks an allowed Origin pattern "scheme://host[:port]" where
// port may be "*".
func checkOrigin(o string) error {
	scheme, rest, ok := strings.Cut(o, "://")
	if o == "*" {
		return fmt.Errorf(`"*" would let any web page call the gateway; list origins`)
	}
	if !ok || (scheme != "http" && scheme != "https") {
		return fmt.Errorf("invalid origin %q (want http(s)://HOST[:PORT], PORT may be *)", o)
	}
	host, port := rest, ""
	if h, p, err := SplitHostPort(rest); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(rest, "[") && strings.HasSuffix(rest, "]") {
		host = rest[1 : len(rest)-1]
	}
	if !validHostname(host) && !isIP(host) {
		return fmt.Errorf("invalid origin %q: bad host %q", o, host)
	}
	if _, ok := parsePort(port, 1); port != "" && port != "*" && !ok {
		return fmt.Errorf("invalid origin %q: bad port %q", o, port)
	}
	return nil
}

func checkEgress(r *collector, s *Server, p string) {
	for i := range s.Network.Egress {
		e := &s.Network.Egress[i]
		ep := fmt.Sprintf("%s.network.egress[%d]", p, i)
		if e.Host == "" && e.CIDR == "" {
			r.errorf(e.Meta.Pos, "%s: needs a host or a cidr", ep)
		}
		if e.Host != "" || e.Meta.Has("host") {
			if err := checkEgressHost(e.Host); err != nil {
				r.errorf(e.Meta.At("host"), "%s.host: %v", ep, err)
			}
		}
		if e.CIDR != "" || e.Meta.Has("cidr") {
			if err := checkCIDR(e.CIDR, e.Host); err != nil {
				r.errorf(e.Meta.At("cidr"), "%s.cidr: %v", ep, err)
			}
		}
		seen := make(map[int]bool)
		for j, port := range e.Ports {
			switch {
			case port < 1 || port > 65535:
				r.errorf(e.Meta.Elem("ports", j), "%s.ports[%d]: %d is not a port (want 1-65535)", ep, j, port)
			case seen[port]:
				r.errorf(e.Meta.Elem("ports", j), "%s.ports[%d]: duplicate port %d", ep, j, port)
			}
			seen[port] = true
		}
	}
}

func checkEgressHost(h string) error {
	switch {
	case h == "*":
		return nil
	case strings.HasPrefix(h, "*."):
		if !validHostname(h[2:]) {
			return fmt.Errorf("invalid wildcard %q (want *.DOMAIN)", h)
		}
		return nil
	case strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]"):
		return fmt.Errorf("write IPv6 addresses without brackets")
	case isIP(h), validHostname(h):
		return nil
	}
	if _, _, err := SplitHostPort(h); err == nil {
		return fmt.Errorf("invalid host %q (put ports in ports: [...])", h)
	}
	return fmt.Errorf("invalid host %q (want a host name, *.DOMAIN, * or an IP address)", h)
}

func checkCIDR(c, host string) error {
	pfx, err := netip.ParsePrefix(c)
	switch {
	case err != nil:
		return fmt.Errorf("invalid CIDR %q", c)
	case pfx.Masked() != pfx:
		return fmt.Errorf("%q has host bits set (want %s)", c, pfx.Masked())
	case isIP(host):
		return fmt.Errorf("host is already an IP address; use either host or cidr")
	}
	return nil
}

// egressForwarder is where the sandbox init's forwarder to the egress
// proxy listens; a forward may not take it.
const egressForwarder = "127.0.0.1:3128"

// sandboxDNSNet holds the addresses the sandbox's DNS gives names
// (transparent egress); a forward may not listen there. The same range as
// initproc's fakeNet, which this cross-platform package cannot import;
// the sandbox checks forwards against that one again at start.
var sandboxDNSNet = netip.MustParsePrefix("127.128.0.0/9")

func checkForward(r *collector, s *Server, p string) {
	seen := make(map[netip.AddrPort]bool)
	for i := range s.Network.Forward {
		f := &s.Network.Forward[i]
		fp := fmt.Sprintf("%s.network.forward[%d]", p, i)
		ap, err := netip.ParseAddrPort(f.Listen)
		// [::ffff:127.0.0.1]:3128 is 127.0.0.1:3128 to the kernel.
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		switch {
		case err != nil || ap.Addr().Zone() != "":
			r.errorf(f.Meta.At("listen"), "%s.listen: invalid address %q (want IP:PORT on loopback, e.g. 127.0.0.1:5432)", fp, f.Listen)
		case !ap.Addr().IsLoopback():
			r.errorf(f.Meta.At("listen"), "%s.listen: %s is not a loopback address", fp, ap.Addr())
		case ap.Port() == 0:
			r.errorf(f.Meta.At("listen"), "%s.listen: port must be 1-65535", fp)
		case ap.String() == egressForwarder:
			r.errorf(f.Meta.At("listen"), "%s.listen: %s is taken by the egress proxy forwarder", fp, egressForwarder)
		case sandboxDNSNet.Contains(ap.Addr()):
			r.errorf(f.Meta.At("listen"), "%s.listen: %s is in %s, which the sandbox's DNS gives names (use 127.0.0.1 or another address below 127.128.0.0)", fp, ap.Addr(), sandboxDNSNet)
		case seen[ap]:
			r.errorf(f.Meta.At("listen"), "%s.listen: %s is already forwarded", fp, ap)
		}
		seen[ap] = true
		if err := checkForwardTarget(f.To); err != nil {
			r.errorf(f.Meta.At("to"), "%s.to: %v", fp, err)
		}
	}
}

func checkForwardTarget(to string) error {
	host, port, err := SplitHostPort(to)
	if err != nil {
		return err
	}
	if !validHostname(host) && !isIP(host) {
		return fmt.Errorf("invalid host %q", host)
	}
	if _, ok := parsePort(port, 1); !ok {
		return fmt.Errorf("invalid port %q (want 1-65535)", port)
	}
	return nil
}
