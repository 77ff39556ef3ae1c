package egressproxy

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"mcpbox/internal/credinject"
	"mcpbox/internal/egress"
	"mcpbox/internal/podagent"
)

// DefaultRegistryPort is the port of the proxy's registration endpoint
// (mutual TLS, the gateway only).
const DefaultRegistryPort = 3129

// StatePath is the registration endpoint: PUT the whole State.
const StatePath = "/v1/state"

// maxState bounds a State's JSON.
const maxState = 16 << 20

// Registration is one pod's secrets added at the proxy
// (secrets.NAME.inject): the real values, the hosts they may go to and
// how, and the placeholders the gateway gave the pod.
type Registration struct {
	Pod         string                      `json:"pod"`
	Server      string                      `json:"server"`
	Credentials []credinject.Credential     `json:"credentials"`
	Fakes       map[string]credinject.Fakes `json:"fakes"`
}

// State is all the gateway registers with a proxy replica, sent whole
// (PUT StatePath) at each change and again every few seconds, and held in
// the replica's memory only: never in its config Secret or any other
// API object.
type State struct {
	// CACert and CAKey are the interception CA's (egress.CA CertPEM and
	// KeyPEM): the pods trust its certificate.
	CACert []byte `json:"ca_cert"`
	CAKey  []byte `json:"ca_key"`
	// UpstreamRoots, if set, are certificates (PEM) trusted for the
	// intercepted hosts' servers besides the replica's system pool: the
	// gateway's own SSL_CERT_FILE, so that an intercepted upstream is
	// verified as a local sandbox's proxy verifies it.
	UpstreamRoots []byte         `json:"upstream_roots,omitempty"`
	Pods          []Registration `json:"pods"`
	// TLSCert and TLSKey, if set, are the replica's renewed registration
	// certificate and key (PEM, from the gateway's pod CA, naming the
	// proxy as the mounted one does): served from the next handshake on,
	// so that the registration port outlives the certificate the replica
	// started with. The gateway sends them only once it renewed one (a
	// replica of an older mcpbox refuses a State it does not know).
	TLSCert []byte `json:"tls_cert,omitempty"`
	TLSKey  []byte `json:"tls_key,omitempty"`
}

// registered is one pod's compiled Registration.
type registered struct {
	server string
	set    *credinject.Set
	digest [32]byte // of the Registration: a change rebuilds the pod's proxy
}

// SetState replaces the registrations, the interception CA and the
// upstream roots. A pod whose registration changed, came or went loses
// its proxy (its next connection gets one built from the new state).
func (p *Proxy) SetState(s State) error {
	var cert *tls.Certificate
	if len(s.TLSCert) > 0 || len(s.TLSKey) > 0 {
		var err error
		if cert, err = p.regTLS.check(s.TLSCert, s.TLSKey); err != nil {
			return fmt.Errorf("the registration certificate: %w", err)
		}
	}
	var ca *egress.CA
	if len(s.CACert) > 0 || len(s.CAKey) > 0 {
		var err error
		if ca, err = egress.ParseCA(s.CACert, s.CAKey); err != nil {
			return err
		}
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if len(s.UpstreamRoots) > 0 && !roots.AppendCertsFromPEM(s.UpstreamRoots) {
		return errors.New("upstream roots: no certificate")
	}
	regs := map[string]*registered{}
	for _, r := range s.Pods {
		if r.Pod == "" || r.Server == "" || len(r.Credentials) == 0 {
			return fmt.Errorf("registration of pod %q: no pod, server or credentials", r.Pod)
		}
		if ca == nil {
			return fmt.Errorf("registration of pod %s: no interception CA", r.Pod)
		}
		if regs[r.Pod] != nil {
			return fmt.Errorf("pod %s registered twice", r.Pod)
		}
		raw, _ := json.Marshal(r)
		digest := sha256.Sum256(append(raw, s.CACert...))
		// The same registration sent again (every ResendEvery) keeps its
		// compiled Set.
		p.mu.Lock()
		old := p.regs[r.Pod]
		p.mu.Unlock()
		if old != nil && old.digest == digest {
			regs[r.Pod] = old
			continue
		}
		set, err := credinject.New(credinject.Options{SandboxID: r.Pod, Credentials: r.Credentials, Fakes: r.Fakes,
			Events: p.log.secretLogger(r.Server)})
		if err != nil {
			return fmt.Errorf("registration of pod %s: %w", r.Pod, err)
		}
		regs[r.Pod] = &registered{server: r.Server, set: set, digest: digest}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, pp := range p.pods {
		var d [32]byte
		if r := regs[k.pod]; r != nil {
			d = r.digest
		}
		if d != pp.digest {
			delete(p.pods, k)
			go pp.p.Close()
		}
	}
	if p.ca != nil && ca != nil && bytes.Equal(p.ca.CertPEM(), ca.CertPEM()) {
		ca = p.ca // the same CA: keep its minted leaves
	}
	p.regs, p.ca, p.roots = regs, ca, roots
	if cert != nil {
		p.regTLS.cert.Store(cert)
	}
	return nil
}

// Registered is the number of pods registered.
func (p *Proxy) Registered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.regs)
}

// injectOptions sets o's injection for pod of server (p.mu held): the
// pod's registered credentials, or, when its server adds secrets at the
// proxy and the pod is not registered here (a replica that restarted
// and has not heard from the gateway again), a refusal of the
// credentials' hosts, so that the placeholder never goes out in a
// tunnel. It returns the registration's digest (zero: none).
func (p *Proxy) injectOptions(o *egress.Options, pod, server string, sp ServerPolicy) ([32]byte, error) {
	if r := p.regs[pod]; r != nil && r.server == server {
		o.Injector, o.CA, o.RootCAs = r.set, p.ca, p.roots
		return r.digest, nil
	}
	if len(sp.Inject) == 0 {
		return [32]byte{}, nil
	}
	hosts, err := credinject.ParseHosts(sp.Inject)
	if err != nil {
		return [32]byte{}, err
	}
	o.Refuse = func(host string, port int) string {
		if hosts.Match(host, port) {
			return fmt.Sprintf("no credential registration for pod %s on this proxy replica (its secrets are added at the proxy; the gateway sends registrations again within %s)", pod, ResendEvery)
		}
		return ""
	}
	return [32]byte{}, nil
}

// ResendEvery is how often the gateway sends its State again to every
// proxy replica: a replica that restarted (and lost its registrations)
// refuses the credentials' hosts until then.
const ResendEvery = 5 * time.Second

// Registry returns the registration endpoint's handler: PUT StatePath
// with a State, from the gateway's client certificate only. log, if not
// nil, gets a line whenever the number of registered pods changes.
func (p *Proxy) Registry(log io.Writer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT "+StatePath, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxState+1))
		if err != nil || len(body) > maxState {
			http.Error(w, "state too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		var s State
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			http.Error(w, "parsing the state: "+err.Error(), http.StatusBadRequest)
			return
		}
		before := p.Registered()
		if err := p.SetState(s); err != nil {
			if log != nil {
				fmt.Fprintf(log, "mcpbox egress-proxy: refused the gateway's registrations: %v\n", err)
			}
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if n := p.Registered(); n != before && log != nil {
			fmt.Fprintf(log, "mcpbox egress-proxy: %d pods registered by the gateway\n", n)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return podagent.GatewayOnly(mux)
}

// ServeRegistry serves Registry(log) on l over mutual TLS (conf:
// ServerTLS) until l is closed. It serves conf's certificate until the
// gateway sends a renewed one (State.TLSCert), which must chain to the
// same CA (conf.ClientCAs: the pod CA signs both sides) and name the
// same proxy.
func (p *Proxy) ServeRegistry(l net.Listener, conf *tls.Config, log io.Writer) error {
	if len(conf.Certificates) != 1 {
		return errors.New("the registration endpoint needs one certificate")
	}
	if err := p.regTLS.init(conf.Certificates[0], conf.ClientCAs); err != nil {
		return err
	}
	conf = conf.Clone()
	conf.NextProtos = []string{"http/1.1"} // Serve speaks HTTP/1.1 on a TLS listener
	conf.Certificates = nil
	conf.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return p.regTLS.cert.Load(), nil }
	srv := &http.Server{Handler: p.Registry(log), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	err := srv.Serve(tls.NewListener(l, conf))
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// ReloadRegistryTLS serves certPEM and keyPEM (the mounted TLS Secret,
// read again after the kubelet refreshed it) from the next handshake, if
// check takes them and they end later than the certificate served now:
// so a replica whose certificate expired before the gateway could send
// it the renewed one (the gateway no longer verifies it) takes the
// renewed one from its mount, and a mount that lags behind a renewal the
// gateway sent never brings an older one back. It reports whether the
// certificate changed.
func (p *Proxy) ReloadRegistryTLS(certPEM, keyPEM []byte) (bool, error) {
	c, err := p.regTLS.check(certPEM, keyPEM)
	if err != nil {
		return false, err
	}
	p.mu.Lock() // as SetState's store
	defer p.mu.Unlock()
	if cur := p.regTLS.cert.Load(); cur != nil && cur.Leaf != nil && !c.Leaf.NotAfter.After(cur.Leaf.NotAfter) {
		return false, nil
	}
	p.regTLS.cert.Store(c)
	return true, nil
}

// registryTLS is the registration endpoint's certificate: the mounted
// one, then each renewed one the gateway sends or the mount shows.
type registryTLS struct {
	cert  atomic.Pointer[tls.Certificate] // what the next handshake serves
	mu    sync.Mutex
	roots *x509.CertPool // guarded by mu; the pod CA; nil: not serving
	names []string       // guarded by mu; the DNS names of the mounted certificate
}

// init sets the mounted certificate and the CA renewed ones must chain to.
func (r *registryTLS) init(c tls.Certificate, roots *x509.CertPool) error {
	leaf := c.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return fmt.Errorf("the registration certificate: %w", err)
		}
		c.Leaf = leaf
	}
	if roots == nil || len(leaf.DNSNames) == 0 {
		return errors.New("the registration certificate: no CA or no DNS name")
	}
	r.mu.Lock()
	r.roots, r.names = roots, slices.Clone(leaf.DNSNames)
	r.mu.Unlock()
	r.cert.Store(&c)
	return nil
}

// check parses a renewed certificate and key: one that does not chain to
// the pod CA for serving, names another host, or is not valid now is
// refused (and the current one kept), so that a bad State cannot take
// the endpoint down.
func (r *registryTLS) check(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	r.mu.Lock()
	roots, names := r.roots, r.names
	r.mu.Unlock()
	if roots == nil {
		return nil, errors.New("this replica serves no registration endpoint")
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, err
		}
	}
	if !slices.Equal(c.Leaf.DNSNames, names) {
		return nil, fmt.Errorf("it names %v, not %v", c.Leaf.DNSNames, names)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: names[0],
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, err
	}
	return &c, nil
}
