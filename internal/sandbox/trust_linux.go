package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// systemBundle is the system trust bundle path the sandbox's TrustBundle
// is bound over, when the host's root shows it (Debian's layout; the
// TLS variables of credinject.TrustEnv cover the other stacks).
const systemBundle = "/etc/ssl/certs/ca-certificates.crt"

// bundlePaths are where TLS stacks look for the system's bundle: Go's
// list (crypto/x509 root_linux.go), which covers Debian, Ubuntu, Alpine,
// Fedora, RHEL, openSUSE and their kin.
var bundlePaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// addTrust writes the Network's trust bundle and CA certificate into the
// egress dir (removed with it) and binds them into the sandbox: at
// TrustBundlePath and TrustCAPath, and over the system bundle, so that
// tools that ignore the TLS variables trust the proxy too.
// Preconditions: startEgress has run.
func (sb *Sandbox) addTrust() error {
	n := sb.spec.Network
	if n.Injector == nil || n.CA == nil {
		return nil
	}
	files := []struct {
		name    string
		data    []byte
		targets []string
	}{
		{"ca-bundle.pem", n.TrustBundle, []string{TrustBundlePath}},
		{"ca.pem", n.CA.CertPEM(), []string{TrustCAPath}},
	}
	if len(n.TrustBundle) > 0 {
		if sb.spec.Root == "" {
			if regularNoSymlinks(systemBundle) == nil {
				files[0].targets = append(files[0].targets, systemBundle)
				sb.cover = append(sb.cover, systemBundle)
			}
		} else {
			cover, create, err := imageBundles(sb.spec.Root)
			if err != nil {
				return err
			}
			files[0].targets = append(files[0].targets, cover...)
			files[0].targets = append(files[0].targets, create...)
			sb.cover = append(sb.cover, cover...)
		}
	}
	for _, f := range files {
		if len(f.data) == 0 {
			continue
		}
		p := filepath.Join(sb.egressDir, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return fmt.Errorf("writing the sandbox trust bundle: %w", err)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		for _, t := range f.targets {
			sb.extraBinds = append(sb.extraBinds, Mount{Source: real, Target: t})
		}
	}
	return nil
}

// imageBundles returns where the trust bundle goes in a sandbox with the
// image root root. cover: the regular files the usual bundle paths lead
// to inside the image, their symlinks followed as they would be inside
// the sandbox and never out of the root (Alpine's /etc/ssl/cert.pem and
// Fedora's ca-bundle.crt are links); binding over the file a link leads
// to covers the link too. Each is a path without symlinks, on a part of
// the image the sandbox shows (not /etc's synthesized files, nor /tmp,
// /run, ...). create: the common path, when the image has no bundle and no
// /etc/ssl at all (the sandbox's /etc is its own; a directory of the
// image could not take a new file).
func imageBundles(root string) (cover, create []string, err error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening image root %s: %w", root, err)
	}
	defer unix.Close(rfd)
	if !hasEntry(rfd, "etc", true) {
		// The image's /etc contributes nothing: the sandbox's is its own.
		return nil, []string{systemBundle}, nil
	}
	for _, p := range bundlePaths {
		fd, err := unix.Openat2(rfd, strings.TrimPrefix(p, "/"), &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		if err != nil {
			continue // absent, or a link out of reach: nothing to cover
		}
		target, ok := bundleTarget(fd, root)
		unix.Close(fd)
		if ok && !slices.Contains(cover, target) {
			cover = append(cover, target)
		}
	}
	if len(cover) > 0 {
		return cover, nil, nil
	}
	if !hasEntry(rfd, "etc/ssl", false) {
		return nil, []string{systemBundle}, nil
	}
	return nil, nil, nil
}

// hasEntry reports whether the image (rfd) shows name in the sandbox:
// it is there, reached without symlinks (a link that is name itself
// counts, unless dir: then name must be a directory, as only a
// directory /etc contributes entries).
func hasEntry(rfd int, name string, dir bool) bool {
	fd, err := unix.Openat2(rfd, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) {
		return false
	}
	if err != nil {
		return !dir // a link as name: shown (as a link) unless a directory is needed
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return true
	}
	return !dir || st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// synthesizedEtc are the /etc files the sandbox writes itself (buildEtc).
var synthesizedEtc = map[string]struct{}{
	"passwd": {}, "group": {}, "hosts": {}, "hostname": {}, "nsswitch.conf": {}, "resolv.conf": {},
}

// bundleTarget returns the sandbox path of fd, a file opened beneath the
// image root root, if the trust bundle may be bound over it.
func bundleTarget(fd int, root string) (string, bool) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", false
	}
	host, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", false
	}
	rel, ok := strings.CutPrefix(host, strings.TrimSuffix(root, "/")+"/")
	if !ok || rel == "" {
		return "", false
	}
	top, rest, _ := strings.Cut(rel, "/")
	if top == "etc" {
		// The sandbox synthesizes these; an image that links its bundle
		// to one of them gets the variables only.
		if _, synth := synthesizedEtc[rest]; synth {
			return "", false
		}
	} else if slices.Contains(imageReserved, top) {
		return "", false // not the image's in the sandbox
	}
	return "/" + rel, true
}

// covers reports whether target is one of the system-view files the
// sandbox's own trust bundle is bound over.
func (sb *Sandbox) covers(target string) bool { return slices.Contains(sb.cover, target) }
