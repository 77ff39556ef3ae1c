package credinject

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"mcpbox/internal/redact"
)

// DefaultMaxBodyBuffer bounds a request body read whole to hash it for
// SigV4 when the request does not carry x-amz-content-sha256.
const DefaultMaxBodyBuffer = 16 << 20

// Credential is one secret added at the proxy. The zero value of every
// optional field means "off".
type Credential struct {
	Name  string // names the credential in events and redaction marks
	Value string // the real value; never leaves this package but upstream
	// Hosts are where the real value may go: "host", "host:port",
	// "*.suffix" (any name strictly below suffix) or an IP, IPv6 in
	// brackets with a port. No port means 443. Only TLS targets.
	Hosts []string
	// Header is the request header whose value is rewritten when it holds
	// the placeholder: to Format with "{value}" the real value
	// (Format "" means "{value}").
	Header string
	Format string
	// Query is a URL query parameter whose value, when it is exactly the
	// placeholder, becomes the real value.
	Query string
	// Basic substitutes the placeholder as the user name or password of an
	// "Authorization: Basic" header.
	Basic bool
	// AnyHeader substitutes the placeholder wherever it appears in request
	// header values.
	AnyHeader bool
	// Body substitutes the placeholder in request bodies (streamed; the
	// placeholder has the value's length, so framing is unchanged).
	Body bool
	// Shape is how the placeholder looks: "" (like the value: same length,
	// prefix and character classes) or "jwt" (a JWT with the value's
	// header and claims layout and an invalid signature).
	Shape string
	// AWS, if non-nil, makes this an AWS key pair re-signed with SigV4;
	// Value, Header, Query, Basic, AnyHeader, Body and Shape must be zero.
	AWS *AWS
}

// AWS is a real AWS key pair. The sandbox is given a fake pair of the same
// shape (AWSPlaceholder); SigV4 header-signed requests with it to the
// credential's hosts are verified and re-signed with this one.
type AWS struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string // optional
	// PassThrough forwards presigned URLs, streaming payload signatures
	// and SigV4a unchanged instead of refusing them; they stay signed
	// with the fake pair and the service will reject them.
	PassThrough bool
}

// Options configure New.
type Options struct {
	SandboxID   string // copied into every Event
	Credentials []Credential
	// Events, if non-nil, receives one Event per substitution and per
	// refusal, from the goroutine handling the request. It must return
	// quickly and never sees a value.
	Events func(Event)
	// MaxBodyBuffer bounds a body read whole for SigV4; zero:
	// DefaultMaxBodyBuffer.
	MaxBodyBuffer int64
	// Fakes, if set, are the placeholders to use instead of fresh ones,
	// by credential name (Set.Fakes of another Set of the same
	// credentials): so that the Kubernetes egress proxy, which rebuilds a
	// pod's Set from the gateway's registration, knows the placeholders
	// the gateway gave the pod. Each must have its value's length and
	// differ from it.
	Fakes map[string]Fakes
}

// Fakes are one credential's placeholders: Value for a value, the fake
// AWS key id, secret and session token for an AWS pair.
type Fakes struct {
	Value  string `json:"value,omitempty"`
	KeyID  string `json:"key_id,omitempty"`
	Secret string `json:"secret,omitempty"`
	Token  string `json:"token,omitempty"`
}

// Event records one substitution or refusal. It never holds a value.
type Event struct {
	Time       time.Time
	SandboxID  string
	Credential string
	Host       string
	Port       int
	// Kind: "inject" (the real value was added), "exfiltration" (a
	// placeholder went to a host not its own; refused) or "refused" (a
	// request the credential cannot serve, e.g. a presigned URL).
	Kind   string
	Where  string // "header NAME", "query NAME", "basic", "body", "sigv4"
	Reason string
}

// hostPattern is one compiled Credential.Hosts entry.
type hostPattern struct {
	name   string // exact normalized name, or IP string
	suffix string // "*.suffix": ".suffix"
	port   int
}

func (h hostPattern) matches(host string, port int) bool {
	if port != h.port {
		return false
	}
	if h.suffix != "" {
		return len(host) > len(h.suffix) && strings.HasSuffix(host, h.suffix)
	}
	return host == h.name
}

func parseHostPattern(s string) (hostPattern, error) {
	host, port := s, 443
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 1 || n > 65535 {
			return hostPattern{}, fmt.Errorf("host %q: invalid port", s)
		}
		host, port = h, n
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case host == "" || host == "*":
		return hostPattern{}, fmt.Errorf("host %q: a credential needs named hosts", s)
	case strings.HasPrefix(host, "*."):
		rest := host[2:]
		if rest == "" || strings.Contains(rest, "*") || !strings.Contains(rest, ".") {
			return hostPattern{}, fmt.Errorf("host %q: a wildcard needs a suffix of two labels or more", s)
		}
		return hostPattern{suffix: "." + rest, port: port}, nil
	case strings.ContainsAny(host, "*/ @"):
		return hostPattern{}, fmt.Errorf("host %q: '*' only as a leading \"*.\"", s)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	return hostPattern{name: host, port: port}, nil
}

// cred is a compiled Credential with its placeholders.
type cred struct {
	Credential
	hosts       []hostPattern
	placeholder string // for Value
	// AWS: the fake pair given to the sandbox.
	fakeKeyID, fakeSecret, fakeToken string
}

func (c *cred) ownHost(host string, port int) bool {
	for _, h := range c.hosts {
		if h.matches(host, port) {
			return true
		}
	}
	return false
}

// Set is the credentials of one sandbox with their placeholders. It
// implements egress.Injector. It is safe for concurrent use.
type Set struct {
	opts   Options
	creds  []*cred
	needle []needle // every placeholder, for scanning
	red    *redact.Redactor
	pf     *qgramFilter // prefilter over red's forms
	// runs catches, after red, what a host made of a value it stored or
	// quoted: cut short, its start dropped, a middle slice; lowerRuns
	// the same in lower case, for header names (re-cased on the way).
	runs, lowerRuns *redact.Runs
	// lowerForms are red's forms in lower case, for header names.
	lowerForms []string
}

// needle is one placeholder string and the value it stands for.
type needle struct {
	cred        *cred
	placeholder string
	real        string
}

// New checks the credentials and generates their placeholders (fresh
// randomness: two sandboxes never share one).
func New(opts Options) (*Set, error) {
	if opts.MaxBodyBuffer <= 0 {
		opts.MaxBodyBuffer = DefaultMaxBodyBuffer
	}
	s := &Set{opts: opts}
	seen := map[string]bool{}
	var secrets []redact.Secret
	for _, c := range opts.Credentials {
		if seen[c.Name] {
			return nil, fmt.Errorf("credential %q: defined twice", c.Name)
		}
		seen[c.Name] = true
		cc, err := compile(c)
		if err == nil {
			if f, ok := opts.Fakes[c.Name]; ok {
				err = cc.useFakes(f)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("credential %q: %w", c.Name, err)
		}
		s.creds = append(s.creds, cc)
		if cc.AWS != nil {
			s.needle = append(s.needle, needle{cc, cc.fakeKeyID, cc.AWS.AccessKeyID}, needle{cc, cc.fakeSecret, cc.AWS.SecretAccessKey})
			secrets = append(secrets, redact.Secret{Name: c.Name, Value: []byte(cc.AWS.SecretAccessKey)},
				redact.Secret{Name: c.Name, Value: []byte(cc.AWS.AccessKeyID)})
			if cc.fakeToken != "" {
				s.needle = append(s.needle, needle{cc, cc.fakeToken, cc.AWS.SessionToken})
				secrets = append(secrets, redact.Secret{Name: c.Name, Value: []byte(cc.AWS.SessionToken)})
			}
			continue
		}
		s.needle = append(s.needle, needle{cc, cc.placeholder, cc.Value})
		secrets = append(secrets, redact.Secret{Name: c.Name, Value: []byte(c.Value)})
	}
	var runs, lowerRuns []redact.RunSecret
	for _, n := range s.needle {
		// What the sandbox knows of a value (its placeholder's kept
		// prefix and punctuation) is not the value's to hide (runKnown).
		rs := redact.RunSecret{Name: n.cred.Name, Value: []byte(n.real), Known: runKnown(n.real, n.placeholder)}
		runs = append(runs, rs)
		lowerRuns = append(lowerRuns, redact.RunSecret{Name: rs.Name, Value: asciiLower(rs.Value), Known: asciiLower(rs.Known)})
	}
	s.runs, s.lowerRuns = redact.NewRuns(runs), redact.NewRuns(lowerRuns)
	if len(secrets) > 0 {
		red, err := redact.NewOptions(secrets, redact.Options{AllowShort: true})
		if err != nil {
			return nil, fmt.Errorf("building the response redactor: %w", err)
		}
		s.red = red
		s.pf = newQgramFilter(red.Needles())
		for _, n := range red.Needles() {
			if len(n) > 0 {
				s.lowerForms = append(s.lowerForms, strings.ToLower(string(n)))
			}
		}
	}
	return s, nil
}

// runKnown is what the sandbox may know of real, for redact.Runs: the
// bytes its placeholder keeps by construction (a known prefix, the
// punctuation), and, for a JWT, its header and claims, which a fresh
// token of the same issuer and subject shares (a host's login or refresh
// answer): only the signature makes the token. A letter or digit the
// random placeholder shares with the value by chance is the value's: the
// sandbox cannot tell which those are (counted as known, they let a run
// of a quarter of the value pass). Each other byte is real's with its
// bits flipped, which never equals it.
func runKnown(real, placeholder string) []byte {
	known := []byte(real)
	keep := prefixLen(real)
	for i := range known {
		kept := i < keep || !isAlnum(real[i])
		if !kept || i >= len(placeholder) || placeholder[i] != real[i] {
			known[i] ^= 0xff
		}
	}
	if parts := strings.Split(real, "."); len(parts) == 3 {
		if h, err := base64.RawURLEncoding.DecodeString(parts[0]); err == nil && json.Valid(h) {
			copy(known, real[:len(parts[0])+1+len(parts[1])+1])
		}
	}
	return known
}

// asciiLower is b with A-Z in lower case and every other byte as it is
// (bytes.ToLower would turn a byte that is no UTF-8 into three).
func asciiLower(b []byte) []byte {
	out := bytes.Clone(b)
	for i, c := range out {
		if c >= 'A' && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return out
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func compile(c Credential) (*cred, error) {
	if c.Name == "" {
		return nil, errors.New("empty name")
	}
	if len(c.Hosts) == 0 {
		return nil, errors.New("no hosts: a credential injected at the proxy needs the hosts it may go to")
	}
	cc := &cred{Credential: c}
	for _, h := range c.Hosts {
		p, err := parseHostPattern(h)
		if err != nil {
			return nil, err
		}
		cc.hosts = append(cc.hosts, p)
	}
	if c.AWS != nil {
		return compileAWS(cc)
	}
	if c.Value == "" {
		return nil, errors.New("empty value")
	}
	if c.Header == "" && c.Query == "" && !c.Basic && !c.AnyHeader && !c.Body {
		return nil, errors.New("nowhere to inject: set header, query, basic, any_header or body")
	}
	if c.Format != "" && strings.Count(c.Format, "{value}") != 1 {
		return nil, fmt.Errorf("format %q: want {value} exactly once", c.Format)
	}
	var err error
	switch c.Shape {
	case "":
		cc.placeholder, err = placeholderFor(c.Value)
	case "jwt":
		cc.placeholder, err = jwtPlaceholderFor(c.Value)
	default:
		err = fmt.Errorf("unknown shape %q (want jwt or none)", c.Shape)
	}
	if err != nil {
		return nil, err
	}
	if len(cc.placeholder) != len(c.Value) {
		return nil, errors.New("placeholder length differs from the value") // body framing relies on it
	}
	return cc, nil
}

func compileAWS(cc *cred) (*cred, error) {
	a := cc.AWS
	if cc.Value != "" || cc.Header != "" || cc.Query != "" || cc.Basic || cc.AnyHeader || cc.Body || cc.Shape != "" {
		return nil, errors.New("aws: value, header, query, basic, any_header, body and shape do not apply")
	}
	if a.AccessKeyID == "" || a.SecretAccessKey == "" {
		return nil, errors.New("aws: access_key_id and secret_access_key are required")
	}
	var err error
	if cc.fakeKeyID, err = keyIDPlaceholderFor(a.AccessKeyID); err != nil {
		return nil, fmt.Errorf("aws access key id: %w", err)
	}
	if cc.fakeSecret, err = placeholderFor(a.SecretAccessKey); err != nil {
		return nil, fmt.Errorf("aws secret access key: %w", err)
	}
	if a.SessionToken != "" {
		if cc.fakeToken, err = placeholderFor(a.SessionToken); err != nil {
			return nil, fmt.Errorf("aws session token: %w", err)
		}
	}
	return cc, nil
}

// useFakes replaces c's fresh placeholders with f's.
func (c *cred) useFakes(f Fakes) error {
	pairs := [][2]string{{f.Value, c.Value}}
	if a := c.AWS; a != nil {
		pairs = [][2]string{{f.KeyID, a.AccessKeyID}, {f.Secret, a.SecretAccessKey}, {f.Token, a.SessionToken}}
	}
	for _, p := range pairs {
		if len(p[0]) != len(p[1]) || p[1] != "" && p[0] == p[1] {
			return errors.New("a given placeholder does not have its value's length or equals it")
		}
	}
	if c.AWS != nil {
		c.fakeKeyID, c.fakeSecret, c.fakeToken = f.KeyID, f.Secret, f.Token
	} else {
		c.placeholder = f.Value
	}
	return nil
}

// Fakes returns every credential's placeholders by name (for
// Options.Fakes of a Set made elsewhere).
func (s *Set) Fakes() map[string]Fakes {
	out := make(map[string]Fakes, len(s.creds))
	for _, c := range s.creds {
		out[c.Name] = Fakes{Value: c.placeholder, KeyID: c.fakeKeyID, Secret: c.fakeSecret, Token: c.fakeToken}
	}
	return out
}

// Hosts is a compiled list of Credential.Hosts patterns.
type Hosts []hostPattern

// ParseHosts compiles hosts as a Credential's Hosts are.
func ParseHosts(hosts []string) (Hosts, error) {
	var out Hosts
	for _, h := range hosts {
		p, err := parseHostPattern(h)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Match reports whether host:port (normalized as in egress.Target) is
// one of hs.
func (hs Hosts) Match(host string, port int) bool {
	for _, h := range hs {
		if h.matches(host, port) {
			return true
		}
	}
	return false
}

// Placeholder returns what the sandbox holds instead of credential name's
// value (for its variable or file); false if there is no such non-AWS
// credential.
func (s *Set) Placeholder(name string) (string, bool) {
	for _, c := range s.creds {
		if c.Name == name && c.AWS == nil {
			return c.placeholder, true
		}
	}
	return "", false
}

// AWSPlaceholder returns the fake key pair (and session token, "" if the
// real pair has none) the sandbox holds for AWS credential name.
func (s *Set) AWSPlaceholder(name string) (keyID, secret, token string, ok bool) {
	for _, c := range s.creds {
		if c.Name == name && c.AWS != nil {
			return c.fakeKeyID, c.fakeSecret, c.fakeToken, true
		}
	}
	return "", "", "", false
}

// IsPlaceholder reports whether v is one of the placeholders the sandbox
// holds (a value, AWS key id, secret or session token): a book that
// learns the sandbox's secrets need not learn it.
func (s *Set) IsPlaceholder(v string) bool {
	for _, n := range s.needle {
		if n.placeholder == v {
			return true
		}
	}
	return false
}

// Placeholders are every placeholder the sandbox holds (values, AWS key
// ids, secrets and session tokens): strings of the sandbox's own that
// look like credentials and are worth nothing, which the gateway's
// credential scan of results leaves alone.
func (s *Set) Placeholders() []string {
	out := make([]string, len(s.needle))
	for i, n := range s.needle {
		out[i] = n.placeholder
	}
	return out
}

// Intercepts reports whether a CONNECT to host:port must be terminated: a
// credential lists it.
func (s *Set) Intercepts(host string, port int) bool {
	for _, c := range s.creds {
		if c.ownHost(host, port) {
			return true
		}
	}
	return false
}

func (s *Set) emit(ev Event) {
	if s.opts.Events == nil {
		return
	}
	ev.Time, ev.SandboxID = time.Now(), s.opts.SandboxID
	s.opts.Events(ev)
}

// Scrub implements egress.Scrubber: text with every form of the Set's
// real values replaced, for the proxy's refusal and failure reasons (an
// upstream transport's error may quote a request the Set filled in).
func (s *Set) Scrub(text string) string {
	if s.red == nil {
		return text
	}
	return s.runs.String(s.red.String(text))
}
