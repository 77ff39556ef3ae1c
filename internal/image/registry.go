package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// repoClient fetches manifests and blobs of one repository. go-containerregistry
// provides the reference syntax, the credentials (authn.DefaultKeychain:
// $DOCKER_CONFIG/config.json, ~/.docker/config.json, credential helpers) and
// the registry's token dance; the requests and every check on what comes
// back are ours.
type repoClient struct {
	base   string // scheme://host/v2/REPO
	ref    Ref
	client *http.Client
}

// schemeGuard refuses plain HTTP, to loopback as well unless insecure,
// for every request: the registry's, and its token server's.
type schemeGuard struct {
	base     http.RoundTripper
	insecure bool
}

func (g schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !(g.insecure && loopbackHost(req.URL.Host)) {
		return nil, fmt.Errorf("refusing plain HTTP to %s (only to a loopback registry with image_insecure: true): %w", req.URL.Host, ErrInsecure)
	}
	return g.base.RoundTrip(req)
}

// ResponseHeaderTimeout bounds the wait for each response of a registry
// to begin, in defaultTransport and in the transport callers give: a
// registry that accepts a connection and never answers must not hang a
// pull, or serve's start, for ever.
const ResponseHeaderTimeout = 60 * time.Second

// defaultTransport is http.DefaultTransport with ResponseHeaderTimeout.
var defaultTransport = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = ResponseHeaderTimeout
	return t
}()

func newRegistry(ctx context.Context, r Ref, o Options) (*repoClient, error) {
	if o.Insecure && !r.Loopback() {
		return nil, fmt.Errorf("registry %s: plain HTTP is allowed to loopback registries only: %w", r.Registry, ErrInsecure)
	}
	var nopts []name.Option
	scheme := "https"
	if o.Insecure {
		nopts = append(nopts, name.Insecure)
		scheme = "http"
	}
	repo, err := name.NewRepository(r.Registry+"/"+r.Repository, nopts...)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", r, err)
	}
	auth, err := authn.Resolve(ctx, authn.DefaultKeychain, repo)
	if err != nil {
		return nil, fmt.Errorf("reading registry credentials for %s: %w", r.Registry, err)
	}
	base := o.Transport
	if base == nil {
		base = defaultTransport
	}
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, schemeGuard{base: base, insecure: o.Insecure},
		[]string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, registryError(r, err)
	}
	return &repoClient{
		base:   scheme + "://" + repo.RegistryStr() + "/v2/" + repo.RepositoryStr(),
		ref:    r,
		client: &http.Client{Transport: rt},
	}, nil
}

// manifestTypes are the manifest media types Pull understands.
var manifestTypes = []string{
	mediaOCIIndex, mediaOCIManifest, mediaDockerList, mediaDockerManifest,
}

const (
	mediaOCIIndex       = "application/vnd.oci.image.index.v1+json"
	mediaOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	mediaDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
)

// get fetches path (below the repository) with the given Accept header.
func (g *repoClient) get(ctx context.Context, path, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.base+path, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, registryError(g.ref, err)
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, registryError(g.ref, err)
	}
	return resp, nil
}

// manifest fetches the manifest or index named by reference (a tag or a
// digest), at most maxManifestSize bytes, unchecked: the caller hashes it.
func (g *repoClient) manifest(ctx context.Context, reference string) ([]byte, error) {
	resp, err := g.get(ctx, "/manifests/"+reference, strings.Join(manifestTypes, ", "))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s of %s: %w", reference, g.ref, err)
	}
	if len(b) > maxManifestSize {
		return nil, fmt.Errorf("manifest %s of %s: over %d bytes: %w", reference, g.ref, maxManifestSize, ErrLimit)
	}
	return b, nil
}

// blob opens the blob digest for reading.
func (g *repoClient) blob(ctx context.Context, digest string) (io.ReadCloser, error) {
	resp, err := g.get(ctx, "/blobs/"+digest, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// registryError turns the registry's answers into errors a user can act
// on: not found, refused (credentials), plain HTTP refused.
func registryError(r Ref, err error) error {
	if errors.Is(err, ErrInsecure) {
		return fmt.Errorf("image %s: %w", r, err)
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("image %s: the registry has no such tag, digest or repository: %w", r, ErrNotFound)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("image %s: the registry refused access (status %d); check the credentials in the docker config (DOCKER_CONFIG): %v", r, terr.StatusCode, err)
		}
		for _, d := range terr.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode || d.Code == transport.BlobUnknownErrorCode {
				return fmt.Errorf("image %s: the registry has no such tag, digest or repository: %w", r, ErrNotFound)
			}
		}
	}
	return fmt.Errorf("pulling image %s: %w", r, err)
}
