//go:build linux

package podagent

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"mcpbox/internal/kube"
)

// WriteTrust is `mcpbox agent --trust-dir DIR`, the init container of a
// pod whose server has secrets added at the egress proxy, run on the
// server's own image: it writes into dir kube.TrustCAName, the
// interception CA's certificate caPEM (certificates only: anything else,
// a key above all, is refused), and kube.TrustBundleName, the image's own
// system bundle (ImageBundle of root, "/" in the pod) followed by caPEM,
// each atomically with mode 0444. The server's container sees the bundle
// over the system bundle paths, so its other hosts keep the image's roots.
// It returns where the image's bundle came from ("" for none).
func WriteTrust(dir, root string, caPEM []byte, bundles []string) (string, error) {
	if err := certificatesOnly(caPEM); err != nil {
		return "", fmt.Errorf("the proxy CA (%s): %w", kube.TrustCAEnv, err)
	}
	system, from, err := ImageBundle(root, bundles)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.Write(system)
	if len(system) > 0 && system[len(system)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.Write(caPEM)
	if err := writeFile(filepath.Join(dir, kube.TrustCAName), caPEM); err != nil {
		return "", err
	}
	if err := writeFile(filepath.Join(dir, kube.TrustBundleName), b.Bytes()); err != nil {
		return "", err
	}
	return from, nil
}

// certificatesOnly checks that b is one or more PEM certificates that
// parse, and nothing else but white space.
func certificatesOnly(b []byte) error {
	n := 0
	for rest := bytes.TrimSpace(b); len(rest) > 0; rest = bytes.TrimSpace(rest) {
		var blk *pem.Block
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) { // pem.Decode would skip text
			return errors.New("holds text that is not PEM")
		}
		if blk, rest = pem.Decode(rest); blk == nil {
			return errors.New("holds a broken PEM block")
		}
		if blk.Type != "CERTIFICATE" {
			return fmt.Errorf("holds a %s block; only certificates belong there", blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Errorf("a certificate does not parse: %w", err)
		}
		n++
	}
	if n == 0 {
		return errors.New("no certificate")
	}
	return nil
}

// ImageBundle returns the image's own system bundle and its path: the
// first of bundles that, resolved inside root (links followed as inside
// the image: an absolute link starts at root, ".." stops there), is a
// regular file; nil and "" when none is. A bundle larger than
// kube.TrustMaxBundle is an error, not truncated.
func ImageBundle(root string, bundles []string) ([]byte, string, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", fmt.Errorf("opening the image root %s: %w", root, err)
	}
	defer unix.Close(rfd)
	for _, p := range bundles {
		fd, err := unix.Openat2(rfd, strings.TrimPrefix(p, "/"), &unix.OpenHow{
			// Non-blocking: a FIFO there must not hang the pod's start.
			Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		})
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EACCES) {
			continue // no bundle the server could read either
		}
		if err != nil {
			return nil, "", fmt.Errorf("the image's trust bundle %s: %w", p, err)
		}
		f := os.NewFile(uintptr(fd), p)
		data, regular, err := readRegular(f)
		f.Close()
		if err != nil {
			return nil, "", fmt.Errorf("the image's trust bundle %s: %w", p, err)
		}
		if regular {
			return data, p, nil
		}
	}
	return nil, "", nil
}

// readRegular reads f whole if it is a regular file of at most
// kube.TrustMaxBundle bytes.
func readRegular(f *os.File) ([]byte, bool, error) {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, false, err
	}
	data, err := io.ReadAll(io.LimitReader(f, kube.TrustMaxBundle+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > kube.TrustMaxBundle {
		return nil, false, fmt.Errorf("larger than %d bytes", kube.TrustMaxBundle)
	}
	return data, true, nil
}

// writeFile writes data to dst with mode 0444, atomically (writeAtomic).
func writeFile(dst string, data []byte) error {
	if err := writeAtomic(dst, bytes.NewReader(data), 0o444); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}
