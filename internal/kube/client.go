package kube

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is how to reach an API server: its address, the CA that signed
// its certificate, and the client's credentials (a certificate or a
// bearer token).
type Config struct {
	// Server is the API server's base URL, https://HOST:PORT.
	Server string
	// CA is the PEM of the CA of the server's certificate; nil: the
	// system's roots.
	CA []byte
	// CertPEM and KeyPEM are the client certificate, if any.
	CertPEM, KeyPEM []byte
	// Token is a bearer token, if any; TokenFile is re-read at each
	// request when set (a projected service-account token rotates).
	Token     string
	TokenFile string
	// Namespace is the kubeconfig context's (or the pod's) namespace;
	// empty: not given.
	Namespace string
}

// The files of a pod's service account (in-cluster credentials).
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// InCluster returns the credentials of the pod mcpbox runs in: the
// service-account token and CA files and KUBERNETES_SERVICE_HOST/PORT.
func InCluster() (Config, error) { return inCluster(serviceAccountDir) }

func inCluster(dir string) (Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, errors.New("in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not running in a pod?)")
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return Config{}, fmt.Errorf("in-cluster config: %w", err)
	}
	tokenFile := filepath.Join(dir, "token")
	if _, err := os.Stat(tokenFile); err != nil {
		return Config{}, fmt.Errorf("in-cluster config: %w", err)
	}
	ns, _ := os.ReadFile(filepath.Join(dir, "namespace"))
	return Config{Server: "https://" + net.JoinHostPort(host, port), CA: ca, TokenFile: tokenFile,
		Namespace: strings.TrimSpace(string(ns))}, nil
}

// kubeconfig is the part of a kubeconfig file mcpbox reads.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Clusters       []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server   string `yaml:"server"`
			CAData   string `yaml:"certificate-authority-data"`
			CAFile   string `yaml:"certificate-authority"`
			Insecure bool   `yaml:"insecure-skip-tls-verify"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			CertData  string         `yaml:"client-certificate-data"`
			CertFile  string         `yaml:"client-certificate"`
			KeyData   string         `yaml:"client-key-data"`
			KeyFile   string         `yaml:"client-key"`
			Token     string         `yaml:"token"`
			TokenFile string         `yaml:"tokenFile"`
			Exec      map[string]any `yaml:"exec"`
		} `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster   string `yaml:"cluster"`
			User      string `yaml:"user"`
			Namespace string `yaml:"namespace"`
		} `yaml:"context"`
	} `yaml:"contexts"`
}

// LoadKubeconfig reads the current context of a kubeconfig file: server,
// CA, client certificate or token. Relative file names in it are relative
// to the file, as kubectl reads them. Exec plugins and skipping the
// server's certificate check are refused.
func LoadKubeconfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return Config{}, fmt.Errorf("parsing kubeconfig %s: %w", path, err)
	}
	cfg, err := kc.current(filepath.Dir(path))
	if err != nil {
		return Config{}, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

func (kc *kubeconfig) current(dir string) (Config, error) {
	name := kc.CurrentContext
	if name == "" && len(kc.Contexts) == 1 {
		name = kc.Contexts[0].Name
	}
	var cfg Config
	var clusterName, userName string
	found := false
	for _, c := range kc.Contexts {
		if c.Name == name {
			clusterName, userName, cfg.Namespace, found = c.Context.Cluster, c.Context.User, c.Context.Namespace, true
		}
	}
	if !found {
		return Config{}, fmt.Errorf("no context %q", name)
	}
	file := func(data, name string) ([]byte, error) {
		if data != "" {
			return decodeB64(data)
		}
		if name == "" {
			return nil, nil
		}
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return os.ReadFile(name)
	}
	found = false
	for _, c := range kc.Clusters {
		if c.Name != clusterName {
			continue
		}
		found = true
		if c.Cluster.Insecure {
			return Config{}, fmt.Errorf("cluster %q: insecure-skip-tls-verify is refused; give its CA", clusterName)
		}
		cfg.Server = c.Cluster.Server
		ca, err := file(c.Cluster.CAData, c.Cluster.CAFile)
		if err != nil {
			return Config{}, fmt.Errorf("cluster %q: certificate authority: %w", clusterName, err)
		}
		cfg.CA = ca
	}
	if !found || cfg.Server == "" {
		return Config{}, fmt.Errorf("no server for cluster %q", clusterName)
	}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		if u.User.Exec != nil {
			return Config{}, fmt.Errorf("user %q: exec credential plugins are not supported; use a token or client certificate", userName)
		}
		var err error
		if cfg.CertPEM, err = file(u.User.CertData, u.User.CertFile); err != nil {
			return Config{}, fmt.Errorf("user %q: client certificate: %w", userName, err)
		}
		if cfg.KeyPEM, err = file(u.User.KeyData, u.User.KeyFile); err != nil {
			return Config{}, fmt.Errorf("user %q: client key: %w", userName, err)
		}
		cfg.Token = u.User.Token
		if u.User.TokenFile != "" {
			cfg.TokenFile = u.User.TokenFile
			if !filepath.IsAbs(cfg.TokenFile) {
				cfg.TokenFile = filepath.Join(dir, cfg.TokenFile)
			}
		}
	}
	return cfg, nil
}

// Client is a Kubernetes API client for the few resources mcpbox uses.
// It is safe for concurrent use.
type Client struct {
	base      *url.URL
	http      *http.Client
	token     string
	tokenFile string
	// Requests counts the requests sent (for the capacity figures).
	requests atomicCounter
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.Server)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("kubernetes server %q: want https://HOST:PORT", cfg.Server)
	}
	if u.Scheme == "http" {
		return nil, fmt.Errorf("kubernetes server %q: plain HTTP is refused", cfg.Server)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CA != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CA) {
			return nil, errors.New("kubernetes CA: no certificate in its PEM")
		}
		tc.RootCAs = pool
	}
	if cfg.CertPEM != nil || cfg.KeyPEM != nil {
		cert, err := tls.X509KeyPair(cfg.CertPEM, cfg.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	tr := &http.Transport{TLSClientConfig: tc, Proxy: nil, MaxIdleConnsPerHost: 16,
		IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{base: u, http: &http.Client{Transport: tr}, token: cfg.Token, tokenFile: cfg.TokenFile}, nil
}

// Requests returns how many API requests the client has sent.
func (c *Client) Requests() int64 { return c.requests.load() }

// Close releases the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// StatusError is an API error: the HTTP status and the API's Status.
type StatusError struct {
	Code    int
	Reason  string
	Message string
}

func (e *StatusError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("kubernetes API: %s (%d %s)", e.Message, e.Code, e.Reason)
	}
	return fmt.Sprintf("kubernetes API: %d %s", e.Code, e.Reason)
}

// IsNotFound reports whether err is the API's 404.
func IsNotFound(err error) bool { return statusCode(err) == http.StatusNotFound }

// IsAlreadyExists reports whether err is the API's 409 for a create.
func IsAlreadyExists(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusConflict && se.Reason == "AlreadyExists"
}

// IsConflict reports whether err is a 409 (a stale resourceVersion, or
// an object that exists).
func IsConflict(err error) bool { return statusCode(err) == http.StatusConflict }

// IsForbidden reports whether err is the API's 403.
func IsForbidden(err error) bool { return statusCode(err) == http.StatusForbidden }

func statusCode(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// do sends one request; body, if not nil, is sent as JSON (or as is when
// it is []byte, with contentType); out, if not nil, receives the JSON
// answer.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body any, contentType string, out any) error {
	resp, err := c.send(ctx, method, path, query, body, contentType)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("decoding %s %s: %w", method, path, err)
	}
	return nil
}

// send sends a request and returns the answer of a 2xx status; any other
// status is a *StatusError.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any, contentType string) (*http.Response, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(data)
		if contentType == "" {
			contentType = "application/json"
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "mcpbox")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if tok, err := c.bearer(); err != nil {
		return nil, err
	} else if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	c.requests.add(1)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	se := &StatusError{Code: resp.StatusCode, Reason: http.StatusText(resp.StatusCode)}
	var st struct{ Reason, Message string }
	if data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); json.Unmarshal(data, &st) == nil {
		if st.Reason != "" {
			se.Reason = st.Reason
		}
		se.Message = st.Message
	}
	return nil, se
}

func (c *Client) bearer() (string, error) {
	if c.tokenFile == "" {
		return c.token, nil
	}
	b, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return "", fmt.Errorf("reading kubernetes token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// readLines calls each for every line of r until it returns false or r
// ends; a line is one watch event.
func readLines(r io.Reader, each func([]byte) (bool, error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		done, err := each(sc.Bytes())
		if err != nil || done {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}
