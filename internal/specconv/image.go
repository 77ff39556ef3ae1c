package specconv

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"

	"mcpbox/internal/config"
	"mcpbox/internal/egress"
	"mcpbox/internal/image"
	"mcpbox/internal/sandbox"
)

// ImageStore is the image store of a state dir: blobs and unpacked
// trees, shared by every server of the state dir (package image).
func ImageStore(stateDir string) string { return filepath.Join(stateDir, "images") }

// ImageOptions are the pull options of image server s: the state dir's
// store, the server's platform and plain-HTTP setting, progress (nil:
// silent), and a transport whose connections go only to public
// addresses or to the image's own registry (egress.HostFetch): the
// registry is the config's choice, but its token server and redirects
// (blobs on a CDN) are the registry's, which is not trusted, and the
// pull runs on the host, outside any sandbox and its proxy.
func ImageOptions(s *config.Server, stateDir string, progress func(string)) image.Options {
	return image.Options{
		Store:     ImageStore(stateDir),
		Platform:  s.Image.Platform,
		Insecure:  s.Image.Insecure,
		Progress:  progress,
		Transport: registryFetch(s),
	}
}

// registryFetch is the host fetch of s's image registry: the registry's
// host and port (scheme default when absent) trusted, every other
// connection checked on the address it is made to. A reference that does
// not parse trusts nothing (the pull fails on it anyway).
func registryFetch(s *config.Server) http.RoundTripper {
	hf := &egress.HostFetch{}
	if r, err := image.ParseRef(s.Image.Ref); err == nil {
		scheme := "https"
		if s.Image.Insecure {
			scheme = "http"
		}
		hf.Trusted = []string{egress.URLHostPort(&url.URL{Scheme: scheme, Host: r.Registry})}
	}
	t := hf.Transport()
	t.ResponseHeaderTimeout = image.ResponseHeaderTimeout
	return t
}

// ApplyImage makes spec (server s's, from Server) run the pulled image
// img: its tree as the sandbox's root, its Entrypoint with s.Args (or
// its Cmd), its Env under the config's env, its WorkingDir. HOME stays
// the sandbox's (images often say /root, which the sandbox lacks), and
// the image's User is not used: the sandbox runs everything as its own
// user, to which the tree's files are mapped. The network stays what the
// config says (none by default): the pull happened outside.
func ApplyImage(spec *sandbox.Spec, s *config.Server, img *image.Image) error {
	argv := img.Config.Argv(s.Args)
	if len(argv) == 0 || argv[0] == "" {
		return fmt.Errorf("server %s: image %s has no Entrypoint or Cmd: give the command in args", s.Name, s.Image.Ref)
	}
	spec.Root = img.Root
	spec.Args = argv
	var env []string
	for _, kv := range img.Config.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || name == "HOME" || strings.ContainsRune(kv, 0) {
			continue
		}
		env = append(env, kv)
	}
	spec.Env = append(env, spec.Env...)
	if wd := img.Config.WorkingDir; wd != "" && spec.Dir == "" {
		if !filepath.IsAbs(wd) {
			wd = "/" + wd
		}
		spec.Dir = filepath.Clean(wd)
	}
	return nil
}
