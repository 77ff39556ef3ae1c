package image

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Default limits, used where a Limits field is zero.
const (
	DefaultMaxBytes    = 4 << 30 // unpacked bytes of one image, and its layers' compressed bytes
	DefaultMaxFiles    = 500_000 // entries of one image, counted over all layers
	DefaultMaxFileSize = 1 << 30 // one file
	DefaultMaxLayers   = 256
)

// Blob sizes that are never legitimate for JSON documents.
const (
	maxManifestSize = 4 << 20
	maxConfigSize   = 8 << 20
)

// Limits bounds what one image may cost. A zero field means its default.
type Limits struct {
	Bytes    int64 // total bytes of all files unpacked; also caps the layers' compressed sizes
	Files    int64 // entries of all layers (skipped ones count too)
	FileSize int64 // bytes of one file
	Layers   int   // layers of the image
}

func (l Limits) withDefaults() Limits {
	if l.Bytes <= 0 {
		l.Bytes = DefaultMaxBytes
	}
	if l.Files <= 0 {
		l.Files = DefaultMaxFiles
	}
	if l.FileSize <= 0 {
		l.FileSize = DefaultMaxFileSize
	}
	if l.Layers <= 0 {
		l.Layers = DefaultMaxLayers
	}
	return l
}

// Options configure Pull.
type Options struct {
	// Store is the directory that holds blobs (Store/blobs/sha256/HEX),
	// unpacked roots (Store/rootfs/HEX) and temp files (Store/tmp). It is
	// created (mode 0700) if missing. Required; it must be absolute.
	Store string
	// Platform is "os/arch[/variant]", e.g. "linux/arm64". Empty means
	// the host's: linux and the GOARCH this binary was built for.
	Platform string
	// Insecure allows plain HTTP to the registry, which must then be on
	// loopback (localhost, 127.0.0.0/8, ::1). Without it every request,
	// token requests included, must be HTTPS.
	Insecure bool
	// Limits bound the image; zero fields take the defaults.
	Limits Limits
	// Progress, if non-nil, receives one line per step that takes time:
	// each layer fetched, then the unpacking. Nil says nothing.
	Progress func(msg string)
	// Transport, if non-nil, carries the registry's HTTP requests (under
	// the HTTPS rule above); nil means http.DefaultTransport with
	// ResponseHeaderTimeout, which a caller's should set too.
	Transport http.RoundTripper
}

// Platform is an image's os/arch[/variant].
type Platform struct {
	OS, Architecture, Variant string
}

func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// HostPlatform is the platform Pull picks by default.
func HostPlatform() Platform { return Platform{OS: "linux", Architecture: runtime.GOARCH} }

// binfmtNames are the names binfmt_misc handlers (qemu-user-static's
// qemu-NAME) have for the architectures GOARCH names.
var binfmtNames = map[string]string{"amd64": "x86_64", "arm64": "aarch64", "arm": "arm", "386": "i386",
	"ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64", "mips64le": "mips64el", "loong64": "loongarch64"}

// CanRun says why this host cannot run the programs of an image built
// for p, nil if it can: p is the host's platform (386 on amd64 too), or
// binfmt_misc has an enabled handler for p's architecture, named as
// qemu-user-static names it, with the F flag (its interpreter opened
// when registered: in the sandbox, where the image is the whole file
// system, the interpreter's path would not be found).
func CanRun(p Platform) error {
	return canRun(p, HostPlatform(), func(name string) ([]byte, error) {
		return os.ReadFile("/proc/sys/fs/binfmt_misc/" + name)
	})
}

// canRun is CanRun on host, with handler reading a binfmt_misc entry.
func canRun(p, host Platform, handler func(name string) ([]byte, error)) error {
	switch {
	case p.OS != host.OS:
		return fmt.Errorf("platform %s: only %s images run here", p, host.OS)
	case p.Architecture == host.Architecture, host.Architecture == "amd64" && p.Architecture == "386":
		return nil
	}
	name := cmp.Or(binfmtNames[p.Architecture], p.Architecture)
	if b, err := handler("qemu-" + name); err == nil && strings.HasPrefix(string(b), "enabled") {
		for line := range strings.Lines(string(b)) {
			if flags, ok := strings.CutPrefix(line, "flags:"); ok && strings.Contains(flags, "F") {
				return nil
			}
		}
		return fmt.Errorf("platform %s is not this host's (%s), and its binfmt_misc handler qemu-%s lacks the F flag (register it fix-binary, as qemu-user-static's packages do): in a sandbox its interpreter is not found", p, host, name)
	}
	return fmt.Errorf("platform %s is not this host's (%s) and no binfmt_misc handler for it (qemu-%s, as qemu-user-static registers) is enabled: its programs cannot run here", p, host, name)
}

// ParsePlatform parses "os/arch[/variant]".
func ParsePlatform(s string) (Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return Platform{}, fmt.Errorf("platform %q: want os/arch[/variant]", s)
	}
	p := Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

func (o Options) check() (Platform, error) {
	if o.Store == "" || !filepath.IsAbs(o.Store) {
		return Platform{}, errors.New("image store: want an absolute directory")
	}
	if o.Platform == "" {
		return HostPlatform(), nil
	}
	return ParsePlatform(o.Platform)
}
