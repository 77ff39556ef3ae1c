package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Inject makes a secret one the sandbox never holds: the sandbox sees a
// placeholder in its variable or file, and the egress proxy puts the real
// value into requests over TLS to Hosts only (package credinject).
type Inject struct {
	// Hosts are where the real value may go: "host", "host:port",
	// "*.suffix" (names strictly below suffix), an IP ("[v6]:port" with a
	// port); no port means 443. Each must be allowed by network.egress.
	Hosts []string
	// Header is the request header rewritten when it holds the
	// placeholder, to Format with "{value}" the real value ("" means
	// "{value}").
	Header, Format string
	Query          string // a query parameter equal to the placeholder
	Basic          bool   // the placeholder as Basic user name or password
	AnyHeader      bool   // the placeholder in any request header value
	Body           bool   // the placeholder in request bodies
	Shape          string // "" (like the value) or InjectShapeJWT
	// AWS, if set, makes the secret an AWS key pair re-signed with SigV4;
	// the secret then has no from: each field of AWS is a reference.
	AWS  *InjectAWS
	Meta Meta
}

// InjectAWS are the references of a real AWS key pair.
type InjectAWS struct {
	AccessKeyID     string // reference
	SecretAccessKey string // reference
	SessionToken    string // reference; optional
	// PassThrough forwards presigned URLs, streaming payload signatures
	// and SigV4a (signed with the fake pair) instead of refusing them.
	PassThrough bool
	Meta        Meta
}

// IsAWS reports whether sec is an AWS key pair added at the proxy.
func (sec *Secret) IsAWS() bool { return sec.Inject != nil && sec.Inject.AWS != nil }

// InjectShapeJWT is Inject.Shape for a JWT-shaped placeholder.
const InjectShapeJWT = "jwt"

func injectNode(in *Inject) *node {
	m := mapNode()
	addStrs(m, "hosts", in.Hosts)
	addStr(m, "header", in.Header)
	addStr(m, "format", in.Format)
	addStr(m, "query", in.Query)
	addBool(m, "basic", in.Basic)
	addBool(m, "any_header", in.AnyHeader)
	addBool(m, "body", in.Body)
	addStr(m, "shape", in.Shape)
	if a := in.AWS; a != nil {
		am := mapNode()
		addStr(am, "access_key_id", a.AccessKeyID)
		addStr(am, "secret_access_key", a.SecretAccessKey)
		addStr(am, "session_token", a.SessionToken)
		addBool(am, "pass_through", a.PassThrough)
		addKV(m, "aws", flowIfEmpty(am))
	}
	return flowIfEmpty(m)
}

// checkInject checks sec.Inject of server s; sp is the secret's path.
// Every inject host must be allowed by the server's egress rules:
// injecting a credential never widens what the sandbox may reach.
func checkInject(r *collector, s *Server, sec *Secret, sp string) {
	in := sec.Inject
	ip := sp + ".inject"
	if len(in.Hosts) == 0 {
		r.errorf(in.Meta.Pos, "%s.hosts: required (where the real value may go)", ip)
	}
	for i, h := range in.Hosts {
		host, port, err := splitInjectHost(h)
		if err != nil {
			r.errorf(in.Meta.Elem("hosts", i), "%s.hosts[%d]: %v", ip, i, err)
			continue
		}
		if !egressAllows(s.Network.Egress, host, port) {
			r.errorf(in.Meta.Elem("hosts", i), "%s.hosts[%d]: %s port %d is not allowed by %s.network.egress (add {host: %s, ports: [%d]}): injection never widens egress",
				ip, i, host, port, strings.TrimSuffix(sp, ".secrets."+sec.Name), host, port)
		}
	}
	if in.Format != "" {
		if in.Header == "" {
			r.errorf(in.Meta.At("format"), "%s.format: needs header", ip)
		} else if !strings.Contains(in.Format, "{value}") {
			r.errorf(in.Meta.At("format"), "%s.format: must contain {value}", ip)
		}
	}
	if in.Header != "" && !headerRE().MatchString(in.Header) {
		r.errorf(in.Meta.At("header"), "%s.header: invalid header name %q", ip, in.Header)
	}
	enum(r, &in.Meta, ip, "shape", in.Shape, InjectShapeJWT)
	if in.AWS != nil {
		checkInjectAWS(r, sec, ip)
		return
	}
	if in.Header == "" && in.Query == "" && !in.Basic && !in.AnyHeader && !in.Body {
		r.errorf(in.Meta.Pos, "%s: say where the value goes: header, query, basic, any_header or body (or aws)", ip)
	}
}

func checkInjectAWS(r *collector, sec *Secret, ip string) {
	in, a := sec.Inject, sec.Inject.AWS
	ap := ip + ".aws"
	if sec.Meta.Has("from") {
		r.errorf(sec.Meta.At("from"), "%s: an aws secret has no from (each of inject.aws's fields is a reference)", strings.TrimSuffix(ip, ".inject"))
	}
	if sec.As == SecretAsFile {
		r.errorf(sec.Meta.At("as"), "%s.as: an aws secret goes into AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (env only)", strings.TrimSuffix(ip, ".inject"))
	}
	for _, k := range []string{"header", "format", "query", "basic", "any_header", "body", "shape"} {
		if in.Meta.Has(k) {
			r.errorf(in.Meta.At(k), "%s.%s: not with aws (SigV4 requests are re-signed)", ip, k)
		}
	}
	for _, f := range []struct {
		key, ref string
		required bool
	}{{"access_key_id", a.AccessKeyID, true}, {"secret_access_key", a.SecretAccessKey, true}, {"session_token", a.SessionToken, false}} {
		switch _, err := ParseSecretRef(f.ref); {
		case f.ref == "" && !f.required && !a.Meta.Has(f.key):
		case f.ref == "":
			r.errorf(a.Meta.Pos, "%s.%s: missing reference (env:VAR, file:PATH or cmd:COMMAND)", ap, f.key)
		case err != nil:
			r.errorf(a.Meta.At(f.key), "%s.%s: %v", ap, f.key, err)
		}
	}
}

// splitInjectHost reads an inject host: "host", "host:port", "*.suffix",
// an IP, "[v6]:port"; no port is 443.
func splitInjectHost(h string) (string, int, error) {
	host, port := h, 443
	if isIP(h) {
		return h, port, nil
	}
	if strings.Contains(h, ":") {
		hp, ps, err := SplitHostPort(h)
		if err != nil {
			return "", 0, err
		}
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("%q: port must be 1-65535", h)
		}
		host, port = hp, n
	}
	if host == "*" {
		return "", 0, fmt.Errorf("%q: the real value may not go to any host (name hosts or *.DOMAIN)", h)
	}
	if err := checkEgressHost(host); err != nil {
		return "", 0, err
	}
	return strings.ToLower(host), port, nil
}

// egressAllows reports whether some rule allows every target host (a
// name, "*.suffix" or an IP) stands for, on port.
func egressAllows(rules []Egress, host string, port int) bool {
	for _, e := range rules {
		ports := e.Ports
		if len(ports) == 0 {
			ports = DefaultEgressPorts
		}
		if !slices.Contains(ports, port) {
			continue
		}
		rh := strings.ToLower(e.Host)
		switch {
		case rh == "*", rh == host:
			return true
		case strings.HasPrefix(rh, "*.") && strings.HasSuffix(host, rh[1:]):
			return true
		case rh == "" && e.CIDR != "":
			a, err1 := netip.ParseAddr(host)
			p, err2 := netip.ParsePrefix(e.CIDR)
			if err1 == nil && err2 == nil && p.Contains(a) {
				return true
			}
		}
	}
	return false
}
