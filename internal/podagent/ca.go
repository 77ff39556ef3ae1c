package podagent

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"
)

const (
	// PodDomain is the DNS suffix of the names in pod certificates: pod
	// NAME's certificate names NAME.PodDomain, and the CA may sign no other
	// DNS name (a name constraint).
	PodDomain = "pod.mcpbox.internal"
	// gatewayHost is the host of the gateway's client identity, the URI
	// mcpbox://gatewayHost (the CA's only permitted URI domain).
	gatewayHost = "gateway.mcpbox.internal"
	// CAFile is the name of the CA's file in LoadOrCreateCA's directory.
	CAFile = "pod-ca.pem"

	// DefaultPodTTL is how long a pod certificate from IssuePod is valid.
	DefaultPodTTL = 24 * time.Hour
	// caTTL is the CA's validity: pods trust it for as long as they run,
	// and a restarted gateway must still reach them.
	caTTL = 10 * 365 * 24 * time.Hour
	// clientTTL is the gateway client certificate's validity; it is
	// issued again when a third of it is left.
	clientTTL = 24 * time.Hour
	// skew backdates NotBefore for clocks a little behind.
	skew = 5 * time.Minute
)

// gatewayURI is the identity in the gateway's client certificate.
var gatewayURI = &url.URL{Scheme: "mcpbox", Host: gatewayHost}

// podNameRE is an RFC 1123 DNS label, as Kubernetes names pods: one label,
// so that NAME.PodDomain is one name and no name can end in another's.
var podNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`) })

// CA is the gateway's certificate authority for its pods: it signs each
// pod's server certificate and the gateway's own client certificate, and
// nothing else (name constraints limit it to PodDomain and the gateway's
// identity). It is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	pool    *x509.CertPool

	mu     sync.Mutex
	client *tls.Certificate // guarded by mu; the gateway's, renewed by clientCert
}

// NewCA returns a new CA with a fresh ECDSA P-256 key.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the pod CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "mcpbox pod CA"},
		NotBefore:             now.Add(-skew),
		NotAfter:              now.Add(caTTL),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		// If this CA is ever trusted where it should not be, it can vouch
		// for nothing but pods and the gateway.
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         []string{PodDomain},
		PermittedURIDomains:         []string{gatewayHost},
		ExcludedIPRanges:            []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}},
	}
	der, err := sign(tmpl, nil, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the pod CA: %w", err)
	}
	return newCA(der, key)
}

func newCA(der []byte, key *ecdsa.PrivateKey) (*CA, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the pod CA: %w", err)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !cert.IsCA || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("the pod CA's certificate is not a CA or does not match its key")
	}
	if time.Now().After(cert.NotAfter) {
		return nil, fmt.Errorf("the pod CA expired on %s", cert.NotAfter.Format(time.DateOnly))
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, key: key, pool: pool,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// LoadOrCreateCA loads the CA kept in dir/CAFile, or creates one there
// (the directory 0700, the file 0600, written whole or not at all), so a
// restarted gateway still reaches the pods it started. A file that others
// may read is refused rather than used: it holds the key every pod trusts.
func LoadOrCreateCA(dir string) (*CA, error) {
	path := filepath.Join(dir, CAFile)
	ca, err := loadCA(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return ca, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	if ca, err = NewCA(); err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod CA key: %w", err)
	}
	data := append(bytes.Clone(ca.certPEM), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)
	tmp, err := os.CreateTemp(dir, ".pod-ca-*")
	if err != nil {
		return nil, fmt.Errorf("writing the pod CA: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data) // CreateTemp made it 0600
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("writing the pod CA: %w", err)
	}
	// A link, not a rename: a gateway that lost a race to create the CA
	// uses the winner's instead of replacing the one its pods trust.
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return loadCA(path)
	} else if err != nil {
		return nil, fmt.Errorf("writing the pod CA: %w", err)
	}
	return ca, nil
}

func loadCA(path string) (*CA, error) {
	// The checks are on the file opened (no symlink followed), so that
	// what is read is what was checked.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("pod CA %s is not a regular file", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the pod CA: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("pod CA %s is not a regular file", path)
	}
	// Another user's file is refused: its owner knows the key (planted
	// in a state directory others may write, or before the gateway
	// first ran) and could pass for the gateway or any pod.
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		owner := -1
		if ok {
			owner = int(st.Uid)
		}
		return nil, fmt.Errorf("pod CA %s is owned by uid %d, not this user (%d): it holds the key every pod trusts", path, owner, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("pod CA %s is open to others (mode %o); it holds the key every pod trusts: chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the pod CA: %w", err)
	}
	var certDER []byte
	var key *ecdsa.PrivateKey
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			certDER = b.Bytes
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parsing the pod CA key in %s: %w", path, err)
			}
			if key, _ = k.(*ecdsa.PrivateKey); key == nil {
				return nil, fmt.Errorf("the pod CA key in %s is not ECDSA", path)
			}
		}
	}
	if certDER == nil || key == nil {
		return nil, fmt.Errorf("pod CA %s lacks its certificate or key", path)
	}
	ca, err := newCA(certDER, key)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return ca, nil
}

// CAPEM returns the CA's certificate, PEM-encoded: what a pod trusts
// (Config.CAFile).
func (ca *CA) CAPEM() []byte { return bytes.Clone(ca.certPEM) }

// IssuePod returns a server certificate for pod name, valid for
// DefaultPodTTL, naming only name.PodDomain and usable only to serve
// (not as a client), with its new ECDSA P-256 key; both PEM-encoded. name
// must be a DNS label (as Kubernetes pod names are).
func (ca *CA) IssuePod(name string) (certPEM, keyPEM []byte, err error) {
	return ca.IssuePodTTL(name, DefaultPodTTL)
}

// IssuePodTTL is IssuePod with a validity of ttl.
func (ca *CA) IssuePodTTL(name string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	if !podNameRE().MatchString(name) {
		return nil, nil, fmt.Errorf("pod name %q is not a DNS label (lowercase letters, digits and '-', at most 63)", name)
	}
	if ttl <= 0 {
		return nil, nil, fmt.Errorf("pod certificate lifetime %s is not positive", ttl)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the key of pod %s: %w", name, err)
	}
	now := time.Now()
	der, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    []string{PodServerName(name)},
		NotBefore:   now.Add(-skew),
		NotAfter:    now.Add(ttl),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the certificate of pod %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the key of pod %s: %w", name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// PodServerName is the DNS name pod name's certificate carries.
func PodServerName(name string) string { return name + "." + PodDomain }

// ClientTLS returns the TLS configuration the gateway dials pod podName
// with: it presents the gateway's client certificate (issued by ca, and
// renewed before it expires) and accepts only a server certificate that
// chains to ca and names podName, so that one pod cannot pass for another
// (a pod holds its own key, and could answer at another pod's address).
func (ca *CA) ClientTLS(podName string) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		RootCAs:              ca.pool,
		ServerName:           PodServerName(podName),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return ca.clientCert() },
	}
}

// clientCert returns the gateway's client certificate, issuing a new one
// when less than a third of the current one's lifetime is left.
func (ca *CA) clientCert() (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c := ca.client; c != nil && time.Until(c.Leaf.NotAfter) > clientTTL/3 {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the gateway's client key: %w", err)
	}
	now := time.Now()
	der, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "mcpbox gateway"},
		URIs:        []*url.URL{gatewayURI},
		NotBefore:   now.Add(-skew),
		NotAfter:    now.Add(clientTTL),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing the gateway's client certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the gateway's client certificate: %w", err)
	}
	ca.client = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	return ca.client, nil
}

// sign makes a certificate of tmpl for pub, signed by parent's key priv
// (tmpl itself when parent is nil), with a random serial number.
func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, priv *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent = tmpl
	}
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
}

// isGateway reports whether a verified client certificate is the
// gateway's: crypto/tls has checked that it chains to the CA and allows
// client authentication; this also requires the gateway's identity, so
// that nothing else the CA might sign passes.
func isGateway(leaf *x509.Certificate) bool {
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != gatewayURI.String() {
		return false
	}
	for _, u := range leaf.ExtKeyUsage {
		if u == x509.ExtKeyUsageClientAuth {
			return true
		}
	}
	return false
}

// ServerTLS is the TLS configuration of an endpoint only the gateway may
// use (a pod's agent, the egress proxy's registration port): certFile
// and keyFile its certificate (CA.IssuePod), caFile the CA's; the client
// must present the gateway's certificate from that CA.
func ServerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	return serverTLS(certFile, keyFile, caFile)
}

// GatewayOnly wraps next to refuse (403) a request without the gateway's
// verified client certificate, in depth behind ServerTLS.
func GatewayOnly(next http.Handler) http.Handler { return gatewayOnly(next) }

// gatewayOnly refuses a request without the gateway's verified client
// certificate. The TLS handshake already requires one that chains to the
// CA; this holds even if that configuration is ever loosened.
func gatewayOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || !isGateway(r.TLS.VerifiedChains[0][0]) {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serverTLS is the pod's TLS configuration: its certificate, and a client
// certificate required that chains to the CA, allows client
// authentication and names the gateway.
func serverTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the pod certificate: %w", err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"h2", "http/1.1"},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.VerifiedChains) == 0 || !isGateway(cs.VerifiedChains[0][0]) {
				return errors.New("the client certificate is not the gateway's")
			}
			return nil
		},
	}, nil
}
