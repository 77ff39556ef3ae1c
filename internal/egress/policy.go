package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// metadataNames are cloud instance-metadata host names. They are refused
// unless a rule or forward names them exactly (a wildcard is not enough),
// whatever they resolve to; 169.254.169.254 itself is link-local.
var metadataNames = map[string]bool{
	"metadata":                     true,
	"metadata.google.internal":     true,
	"metadata.goog":                true,
	"metadata.azure.internal":      true,
	"instance-data":                true,
	"instance-data.ec2.internal":   true,
	"metadata.platformequinix.com": true,
}

// policy holds the compiled rules and forwards of one proxy.
type policy struct {
	rules    []rule
	forwards []forwardTarget
	local    localAddrs
}

type forwardTarget struct {
	name string     // normalized host name, or ""
	ip   netip.Addr // IP host
	port int
	to   string // as configured, for events
}

func compilePolicy(rules []Rule, forwards []Forward) (*policy, error) {
	p := &policy{}
	for i, r := range rules {
		c, err := compileRule(r)
		if err != nil {
			return nil, fmt.Errorf("checking rule %d: %w", i, err)
		}
		p.rules = append(p.rules, c)
	}
	for i, f := range forwards {
		t, err := compileForward(f)
		if err != nil {
			return nil, fmt.Errorf("checking forward %d: %w", i, err)
		}
		p.forwards = append(p.forwards, t)
	}
	return p, nil
}

func compileForward(f Forward) (forwardTarget, error) {
	host, portStr, err := net.SplitHostPort(f.To)
	if err != nil {
		return forwardTarget{}, fmt.Errorf("parsing forward target %q: %w", f.To, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return forwardTarget{}, fmt.Errorf("parsing forward target %q: invalid port", f.To)
	}
	name, ip, err := parseHostStrict(host)
	if err != nil {
		return forwardTarget{}, fmt.Errorf("parsing forward target %q: %w", f.To, err)
	}
	if f.Listen != "" {
		if _, _, err := net.SplitHostPort(f.Listen); err != nil {
			return forwardTarget{}, fmt.Errorf("parsing forward listen address %q: %w", f.Listen, err)
		}
	}
	return forwardTarget{name: name, ip: ip.Unmap(), port: port, to: f.To}, nil
}

// plan is the verdict on a target before its name is resolved.
type plan struct {
	name    string     // normalized host name; "" for IP targets
	ip      netip.Addr // IP target
	port    int
	forward bool   // the target is a Forward's To
	rule    string // allowing rule (IP targets and forwards)
	deny    string // non-empty: refused for this reason
	cands   []*rule
}

// decide checks the target host:port a client asked for. IP targets are
// decided completely; for names, cands are the rules whose host and port
// match, and checkAddrs decides on the resolved addresses.
func (p *policy) decide(host string, port int) plan {
	name, ip, err := parseHost(host)
	pl := plan{name: name, ip: ip, port: port}
	if err != nil {
		pl.deny = err.Error()
		return pl
	}
	if port < 1 || port > 65535 {
		pl.deny = "invalid port " + strconv.Itoa(port)
		return pl
	}
	for _, f := range p.forwards {
		if f.port == port && (ip.IsValid() && f.ip == ip.Unmap() || name != "" && f.name == name) {
			pl.forward, pl.rule = true, "forward "+f.to
			return pl
		}
	}
	if ip.IsValid() {
		return p.decideIP(pl)
	}
	explicit := false
	for i := range p.rules {
		r := &p.rules[i]
		if r.allowsPort(port) && r.matchesName(name) {
			pl.cands = append(pl.cands, r)
			explicit = explicit || r.name == name
		}
	}
	switch {
	case metadataNames[name] && !explicit:
		// Before noRule, whose hint would show how to allow it.
		pl.deny = "cloud metadata host name"
	case len(pl.cands) == 0:
		pl.deny = noRule(name, port)
	}
	return pl
}

// noRule is why a target no rule names is refused, with the rule that
// would allow it, as a config and as exec's and run's flag write it: the
// person reading the refusal (serve's log, mcpbox logs, the dashboard, a
// plain-HTTP client's 403) learns what to change.
func noRule(host string, port int) string {
	target := net.JoinHostPort(host, strconv.Itoa(port))
	rule, flag := "{host: "+host+"}", host
	if strings.Contains(host, ":") { // IPv6: quoted in YAML, bracketed on the command line
		rule, flag = "{host: \""+host+"\"}", "["+host+"]"
	}
	if port != 443 && port != 80 { // a rule without ports allows those two
		rule = strings.TrimSuffix(rule, "}") + ", ports: [" + strconv.Itoa(port) + "]}"
		flag = target
	}
	return "no rule allows " + target + " (to allow it: network.egress: [" + rule + "] in the server's config, or --allow-host " + flag + ")"
}

// privateHint says how to allow name at its private address a: a rule
// for the name that lists the address, or the address itself.
func privateHint(name string, a netip.Addr, port int) string {
	bits := 32
	if a.Is6() {
		bits = 128
	}
	rule := fmt.Sprintf("{host: %s, cidr: \"%s\"", name, netip.PrefixFrom(a, bits))
	if port != 443 && port != 80 {
		rule += ", ports: [" + strconv.Itoa(port) + "]"
	}
	return " (a rule for a name opens no private address; to allow it: network.egress: [" + rule +
		"}] in the server's config, or connect to the address with --allow-host " + net.JoinHostPort(a.String(), strconv.Itoa(port)) + ")"
}

// refusalCode is the kind of a refusal reason, for RefusedHeader: a
// fixed token, whatever host the reason names.
func refusalCode(reason string) string {
	switch {
	case strings.HasPrefix(reason, "no rule allows "):
		return "no-rule"
	case strings.HasPrefix(reason, "blocked "), strings.Contains(reason, " resolves to blocked "):
		return "blocked-address"
	case reason == "cloud metadata host name":
		return "metadata-host"
	case strings.HasPrefix(reason, "the sandbox's egress byte budget"):
		return "byte-budget"
	case strings.HasSuffix(reason, " has no addresses"):
		return "no-address"
	}
	return "policy"
}

func (p *policy) decideIP(pl plan) plan {
	reason := p.blocked(pl.ip)
	u := pl.ip.Unmap() // a rule for 10.0.0.5 also names [::ffff:10.0.0.5]
	matched := false
	for i := range p.rules {
		r := &p.rules[i]
		if !r.allowsPort(pl.port) {
			continue
		}
		if r.namesIP(pl.ip) || r.namesIP(u) {
			pl.rule = r.String()
			return pl
		}
		if r.any || r.ip == u {
			matched = true
			if reason == "" && pl.rule == "" {
				pl.rule = r.String()
			}
		}
	}
	switch {
	case !matched && u.IsUnspecified():
		// No hint to allow it: connecting to it reaches the host's own
		// services, whatever port they listen on.
		pl.deny = "no rule allows " + net.JoinHostPort(pl.ip.String(), strconv.Itoa(pl.port)) +
			": the unspecified address reaches this host's own services; name the host or address meant"
	case !matched && !strings.Contains(reason, "cloud metadata"):
		pl.deny = noRule(pl.ip.String(), pl.port)
	case reason != "":
		pl.rule, pl.deny = "", "blocked "+reason+" "+pl.ip.String()
	}
	return pl
}

// checkAddrs decides on the addresses a name target resolved to. Every
// address must pass: one blocked address refuses the whole target, so a
// name that mixes public and private answers cannot be steered to the
// private one. It returns the rule allowing each address.
func (p *policy) checkAddrs(pl plan, addrs []netip.Addr) (rules []string, deny string) {
	if len(addrs) == 0 {
		return nil, "host " + pl.name + " has no addresses"
	}
	rules = make([]string, len(addrs))
	for i, a := range addrs {
		if pl.forward {
			rules[i] = pl.rule
			continue
		}
		rules[i] = p.ruleForAddr(pl.cands, a)
		if rules[i] == "" {
			why := p.blocked(a)
			deny = fmt.Sprintf("%s resolves to blocked %s %s", pl.name, why, a)
			if len(pl.cands) > 0 && !strings.Contains(why, "cloud metadata") {
				// The name is allowed, its address is not: say how a
				// person who meant it opens it (DNS alone never does).
				deny += privateHint(pl.name, a, pl.port)
			}
			return nil, deny
		}
	}
	return rules, ""
}

func (p *policy) ruleForAddr(cands []*rule, a netip.Addr) string {
	for _, r := range cands {
		if r.CIDR.IsValid() && r.CIDR.Contains(a) {
			return r.String()
		}
	}
	if p.blocked(a) != "" || len(cands) == 0 {
		return ""
	}
	return cands[0].String()
}
