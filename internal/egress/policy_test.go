package egress

import (
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"mcpbox/internal/config"
)

func TestMatchesName(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "evilexample.com", false},
		{"*.example.com", "example.com.evil.net", false},
		{"*.Example.COM.", "a.example.com", true},
		{"example.com", "example.com", true},
		{"Example.com.", "example.com", true},
		{"example.com", "a.example.com", false},
		{"*", "anything.at.all", true},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", true},
		{"*.xn--p1ai", "xn--e1afmkfd.xn--p1ai", true},
		{"10.0.0.1", "10.0.0.1", false}, // names only; IPs go through namesIP
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.name, func(t *testing.T) {
			r, err := compileRule(Rule{Host: tt.pattern})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.matchesName(tt.name); got != tt.want {
				t.Errorf("%q matches %q = %v, want %v", tt.pattern, tt.name, got, tt.want)
			}
		})
	}
}

func TestCompileRuleErrors(t *testing.T) {
	bad := []Rule{
		{},
		{Host: "a.*.com"},
		{Host: "*example.com"},
		{Host: "**.example.com"},
		{Host: "*.1.2.3.4"},
		{Host: "bad host"},
		{Host: "2130706433"}, // non-canonical IPv4 in config
		{Host: "0177.0.0.1"}, // likewise
		{Host: "example.com", Ports: []int{0}},
		{Host: "example.com", Ports: []int{65536}},
		{CIDR: netip.MustParsePrefix("10.0.0.1/8")},
		{Host: "10.0.0.1", CIDR: netip.MustParsePrefix("10.0.0.0/8")},
	}
	for _, r := range bad {
		t.Run(r.Host+"/"+r.CIDR.String(), func(t *testing.T) {
			if _, err := compileRule(r); err == nil {
				t.Errorf("compileRule(%+v) succeeded, want error", r)
			}
			if _, err := New(Options{Rules: []Rule{r}}); err == nil {
				t.Errorf("New with rule %+v succeeded, want error", r)
			}
		})
	}
	if _, err := New(Options{Forwards: []Forward{{Listen: "127.0.0.1:5432", To: "db.internal"}}}); err == nil {
		t.Error("New with forward lacking a port succeeded")
	}
}

func TestParseHostPort(t *testing.T) {
	tests := []struct {
		in      string
		want    Rule
		wantErr bool
	}{
		{in: "api.github.com", want: Rule{Host: "api.github.com"}},
		{in: "api.github.com:8443", want: Rule{Host: "api.github.com", Ports: []int{8443}}},
		{in: "*.githubusercontent.com", want: Rule{Host: "*.githubusercontent.com"}},
		{in: "127.0.0.1:8080", want: Rule{Host: "127.0.0.1", Ports: []int{8080}}},
		{in: "[::1]:8080", want: Rule{Host: "::1", Ports: []int{8080}}},
		{in: "[fd00::1]", want: Rule{Host: "fd00::1"}},
		{in: "fd00::1", want: Rule{Host: "fd00::1"}},
		{in: "example.com:0", wantErr: true},
		{in: "example.com:http", wantErr: true},
		{in: ":443", wantErr: true},
		{in: "", wantErr: true},
		{in: "a.*.com:443", wantErr: true},
		{in: "http://127.0.0.2:18080/x", wantErr: true},
		{in: "example.com:", wantErr: true},
		{in: "fd00::", want: Rule{Host: "fd00::"}},
		{in: "example.com:443/path", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseHostPort(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseHostPort(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			// A URL is named as one, not read as a bad IPv6 address.
			if strings.Contains(tt.in, "://") && (err == nil || !strings.Contains(err.Error(), "not a URL (here: 127.0.0.2:18080)")) {
				t.Errorf("ParseHostPort(%q) = %v, want it to say a URL is no host", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); !tt.wantErr && diff != "" {
				t.Errorf("ParseHostPort(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestDecide covers targets decided before resolution: IP literals in
// every spelling, ports, forwards and metadata names.
func TestDecide(t *testing.T) {
	pol, err := compilePolicy([]Rule{
		{Host: "*"},
		{Host: "127.0.0.1", Ports: []int{8080}},
		{Host: "api.example.com", Ports: []int{443}},
		{CIDR: netip.MustParsePrefix("10.9.0.0/16"), Ports: []int{5432}},
		{Host: "metadata.google.internal", Ports: []int{8000}},
	}, []Forward{{Listen: "127.0.0.1:5432", To: "db.internal:5432"}, {To: "192.168.7.7:6379"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host     string
		port     int
		allow    bool
		forward  bool
		denyPart string
	}{
		{host: "8.8.8.8", port: 443, allow: true},
		{host: "8.8.8.8", port: 22, denyPart: "no rule"},
		{host: "127.0.0.1", port: 8080, allow: true},
		{host: "127.0.0.1", port: 8081, denyPart: "no rule"}, // "*" doesn't list 8081
		{host: "127.0.0.1", port: 443, denyPart: "loopback"},
		{host: "2130706433", port: 443, denyPart: "loopback"},
		{host: "0177.0.0.1", port: 443, denyPart: "loopback"},
		{host: "0x7f.1", port: 443, denyPart: "loopback"},
		{host: "2130706433", port: 8080, allow: true}, // is 127.0.0.1, which a rule names
		{host: "::ffff:127.0.0.1", port: 8080, allow: true},
		{host: "::ffff:127.0.0.1", port: 443, denyPart: "IPv4-mapped loopback"},
		{host: "::1", port: 443, denyPart: "loopback"},
		{host: "169.254.169.254", port: 80, denyPart: "link-local"},
		{host: "0251.0376.0251.0376", port: 80, denyPart: "link-local"},
		{host: "64:ff9b::a9fe:a9fe", port: 80, denyPart: "NAT64"},
		{host: "2002:a9fe:a9fe::", port: 80, denyPart: "6to4"},
		{host: "10.0.0.1", port: 443, denyPart: "private"},
		{host: "100.100.100.200", port: 80, denyPart: "CGNAT"},
		{host: "10.9.1.2", port: 5432, allow: true},
		{host: "10.8.1.2", port: 5432, denyPart: "no rule"},
		{host: "db.internal", port: 5432, allow: true, forward: true},
		{host: "DB.internal.", port: 5432, allow: true, forward: true},
		{host: "db.internal", port: 5433, denyPart: "no rule"},
		{host: "192.168.7.7", port: 6379, allow: true, forward: true},
		{host: "192.168.7.7", port: 6380, denyPart: "no rule"},
		{host: "metadata.google.internal", port: 80, denyPart: "metadata"},
		{host: "metadata", port: 443, denyPart: "metadata"},
		{host: "instance-data", port: 80, denyPart: "metadata"},
		{host: "metadata.google.internal", port: 8000, allow: true}, // named exactly
		{host: "1.2.3.0x", port: 443, denyPart: "invalid"},
		{host: "example.com", port: 0, denyPart: "invalid port"},
		{host: "fe80::1%eth0", port: 443, denyPart: "zoned"},
	}
	for _, tt := range tests {
		t.Run(tt.host+":"+strconv.Itoa(tt.port), func(t *testing.T) {
			pl := pol.decide(tt.host, tt.port)
			if tt.allow != (pl.deny == "") || !strings.Contains(pl.deny, tt.denyPart) || pl.forward != tt.forward {
				t.Errorf("decide(%s, %d) = deny %q forward %v; want allow %v forward %v deny containing %q",
					tt.host, tt.port, pl.deny, pl.forward, tt.allow, tt.forward, tt.denyPart)
			}
			if pl.deny == "" && pl.ip.IsValid() && pl.rule == "" {
				t.Errorf("decide(%s, %d) allowed an IP without naming the rule", tt.host, tt.port)
			}
		})
	}
}

// TestCheckAddrs covers name targets after resolution: every answer must
// pass, and CIDRs open private answers for their host only.
func TestCheckAddrs(t *testing.T) {
	pol, err := compilePolicy([]Rule{
		{Host: "*.example.com"},
		{Host: "db.corp.example", Ports: []int{5432}, CIDR: netip.MustParsePrefix("10.1.0.0/16")},
		{Host: "rebind.example.net"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		host     string
		port     int
		addrs    []string
		denyPart string
		rule     string
	}{
		{name: "public", host: "a.example.com", port: 443, addrs: []string{"93.184.215.14", "2606:2800:21f::1"}, rule: "*.example.com:443,80"},
		{name: "private answer", host: "a.example.com", port: 443, addrs: []string{"10.0.0.5"}, denyPart: "private"},
		{name: "mixed answers", host: "a.example.com", port: 443, addrs: []string{"93.184.215.14", "127.0.0.1"}, denyPart: "loopback"},
		{name: "metadata by name", host: "x.example.com", port: 80, addrs: []string{"169.254.169.254"}, denyPart: "link-local"},
		{name: "mapped loopback", host: "a.example.com", port: 443, addrs: []string{"::ffff:127.0.0.1"}, denyPart: "loopback"},
		{name: "ULA", host: "a.example.com", port: 443, addrs: []string{"fd00::1"}, denyPart: "unique local"},
		{name: "cidr opens private", host: "db.corp.example", port: 5432, addrs: []string{"10.1.2.3"}, rule: "db.corp.example in 10.1.0.0/16:5432"},
		{name: "cidr only its range", host: "db.corp.example", port: 5432, addrs: []string{"10.2.2.3"}, denyPart: "private"},
		{name: "no answers", host: "a.example.com", port: 443, denyPart: "no addresses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := pol.decide(tt.host, tt.port)
			if pl.deny != "" {
				t.Fatalf("decide denied: %s", pl.deny)
			}
			var addrs []netip.Addr
			for _, a := range tt.addrs {
				addrs = append(addrs, netip.MustParseAddr(a))
			}
			rules, deny := pol.checkAddrs(pl, addrs)
			if (deny == "") != (tt.denyPart == "") || !strings.Contains(deny, tt.denyPart) {
				t.Fatalf("checkAddrs(%v) deny = %q, want containing %q", tt.addrs, deny, tt.denyPart)
			}
			if tt.rule != "" && rules[0] != tt.rule {
				t.Errorf("rule = %q, want %q", rules[0], tt.rule)
			}
		})
	}
	for _, h := range []string{"example.com", "evilexample.com", "a.example.com.evil"} {
		if pl := pol.decide(h, 443); pl.deny == "" {
			t.Errorf("decide(%s) allowed by %d candidate rules", h, len(pl.cands))
		}
	}
}

// TestNoRuleNamesTheRule: a target no rule allows is refused with the
// rule that would allow it, as config YAML and as the --allow-host flag;
// each, added, allows that target.
func TestNoRuleNamesTheRule(t *testing.T) {
	for _, target := range []struct {
		host string
		port int
	}{{"example.com", 443}, {"example.com", 80}, {"api.example.com", 8443}, {"127.0.0.1", 18998}, {"203.0.113.9", 443}, {"::1", 443}, {"2001:db8::1", 9000}} {
		t.Run(net.JoinHostPort(target.host, strconv.Itoa(target.port)), func(t *testing.T) {
			p, err := compilePolicy([]Rule{{Host: "other.example"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			asked := target.host
			if strings.Contains(asked, ":") {
				asked = "[" + asked + "]"
			}
			deny := p.decide(asked, target.port).deny
			m := regexp.MustCompile(`^no rule allows \S+ \(to allow it: network\.egress: \[(.+)\] in the server's config, or --allow-host (\S+)\)$`).FindStringSubmatch(deny)
			if m == nil {
				t.Fatalf("refused with %q, want the rule that allows it named", deny)
			}
			flagRule, err := ParseHostPort(m[2])
			if err != nil {
				t.Fatalf("--allow-host %s: %v", m[2], err)
			}
			cfg, err := config.Load("t.yaml", []byte("version: 1\nservers:\n  s:\n    command: [x]\n    network:\n      egress: ["+m[1]+"]\n"))
			if err != nil {
				t.Fatalf("network.egress: [%s]: %v", m[1], err)
			}
			e := cfg.Server("s").Network.Egress[0]
			yamlRule := Rule{Host: e.Host, Ports: e.Ports}
			for _, r := range []Rule{flagRule, yamlRule} {
				p, err := compilePolicy([]Rule{r}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if pl := p.decide(asked, target.port); pl.deny != "" {
					t.Errorf("with the rule %+v named in the refusal, %s is still refused: %s", r, asked, pl.deny)
				}
			}
		})
	}
}

// TestUnspecifiedRefusalHasNoHint: 0.0.0.0 and ::, which reach the host's
// own services, are refused saying so, without the hint that shows how to
// allow a target no rule names.
func TestUnspecifiedRefusalHasNoHint(t *testing.T) {
	p, err := compilePolicy([]Rule{{Host: "other.example"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"0.0.0.0", "[::]", "[::ffff:0.0.0.0]"} {
		deny := p.decide(host, 8080).deny
		if !strings.Contains(deny, "this host's own services") || strings.Contains(deny, "to allow it") {
			t.Errorf("%s: refused with %q, want it named the host's own, without a hint", host, deny)
		}
	}
}

// TestMetadataRefusalHasNoHint: the cloud metadata endpoint, by address
// or by name, is refused as such when no rule names it, without the hint
// that shows how to allow a target no rule names.
func TestMetadataRefusalHasNoHint(t *testing.T) {
	p, err := compilePolicy([]Rule{{Host: "other.example"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"169.254.169.254", "metadata.google.internal", "[::ffff:169.254.169.254]"} {
		deny := p.decide(host, 80).deny
		if !strings.Contains(deny, "metadata") || strings.Contains(deny, "to allow it") || refusalCode(deny) == "no-rule" {
			t.Errorf("%s: refused with %q (%s), want a metadata refusal without a hint", host, deny, refusalCode(deny))
		}
	}
}
