// Command agentimage builds the agent image of the Kubernetes backend
// (backend.agent_image): one layer holding a static mcpbox binary at
// /usr/local/bin/mcpbox (mode 0555, owned by root), user 65532, no shell
// and nothing else; then pushes it to a registry or writes it as an OCI
// image layout. Its digest is printed: pin agent_image by it.
//
//	CGO_ENABLED=0 go build -trimpath -o mcpbox ./cmd/mcpbox
//	go run ./scripts/agentimage -bin mcpbox -push registry.example/mcpbox-agent:v1
//	go run ./scripts/agentimage -bin mcpbox -oci ./agent-oci    # then skopeo, crane or oras copy
//
// -push uses the docker config.json credentials (and helpers), as
// `mcpbox` does. The image is reproducible: the same binary gives the
// same digest.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// AgentPath is where the image holds mcpbox: backend.agent_path's
// default, so a config names only agent_image.
const AgentPath = "/usr/local/bin/mcpbox"

func main() {
	bin := flag.String("bin", "", "the static mcpbox binary (CGO_ENABLED=0 go build ./cmd/mcpbox)")
	push := flag.String("push", "", "push the image to this reference (REGISTRY/REPO:TAG)")
	oci := flag.String("oci", "", "write the image as an OCI image layout into this directory")
	insecure := flag.Bool("insecure", false, "push over plain HTTP (a loopback registry)")
	flag.Parse()
	if *bin == "" || (*push == "") == (*oci == "") {
		fmt.Fprintln(os.Stderr, "usage: agentimage -bin MCPBOX (-push REF | -oci DIR) [-insecure]")
		os.Exit(2)
	}
	digest, err := run(*bin, *push, *oci, *insecure)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentimage:", err)
		os.Exit(1)
	}
	fmt.Println(digest)
}

// run builds the image of bin and pushes it to ref or writes it into
// the layout dir; it returns the manifest's digest.
func run(bin, ref, dir string, insecure bool) (string, error) {
	img, err := build(bin)
	if err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	if ref != "" {
		var opts []name.Option
		if insecure {
			opts = append(opts, name.Insecure)
		}
		r, err := name.ParseReference(ref, opts...)
		if err != nil {
			return "", err
		}
		if err := remote.Write(r, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return "", fmt.Errorf("pushing %s: %w", ref, err)
		}
		return d.String(), nil
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", fmt.Errorf("writing the layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img); err != nil {
		return "", fmt.Errorf("writing the layout %s: %w", dir, err)
	}
	return d.String(), nil
}

// build makes the one-layer image of the static binary at bin, for the
// binary's own architecture.
func build(bin string) (v1.Image, error) {
	arch, err := staticArch(bin)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: AgentPath[1:], Mode: 0o555, Size: int64(len(b)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(b); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: arch, Created: v1.Time{Time: epoch},
		Config: v1.Config{User: "65532:65532", Entrypoint: []string{AgentPath}}})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: epoch},
		CreatedBy: "agentimage: COPY mcpbox " + AgentPath}})
}

// staticArch is the GOARCH of the ELF executable at bin, which must not
// need a dynamic loader (the agent image has none).
func staticArch(bin string) (string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return "", fmt.Errorf("%s: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errors.New(bin + " is not static (it needs a dynamic loader): build it with CGO_ENABLED=0")
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_RISCV:
		return "riscv64", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	case elf.EM_S390:
		return "s390x", nil
	}
	return "", fmt.Errorf("%s: machine %v is not a Go linux architecture this tool knows", bin, f.Machine)
}
