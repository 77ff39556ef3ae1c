package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Image is a pulled and unpacked image.
type Image struct {
	Ref Ref // as parsed from the reference given to Pull
	// Digest is the digest of the platform's image manifest: what a lock
	// file pins. IndexDigest is the multi-arch index's, when the
	// reference named one.
	Digest      string
	IndexDigest string
	Platform    Platform
	Config      Config
	// Root is the unpacked root tree (Options.Store/rootfs/HEX), for
	// sandbox.Spec.Root. It must be treated as read-only.
	Root string
	// Layers are the layer digests, lowest first.
	Layers []string
	// Notes are the entries unpacking skipped (device nodes, fifos) and
	// other things it changed; empty when the tree was already unpacked.
	Notes []string
}

// Config is what the image says about running it.
type Config struct {
	Entrypoint []string
	Cmd        []string
	Env        []string // KEY=VALUE
	WorkingDir string
	// User is the image's user ("1000", "node", "1000:1000"); the sandbox
	// runs every image as its own user, to which it maps the files'
	// owner, so this is informational.
	User string
}

// Argv is the command a container runtime would run: Entrypoint followed
// by args, or by Cmd when args is empty.
func (c Config) Argv(args []string) []string {
	if len(args) == 0 {
		args = c.Cmd
	}
	return append(slices.Clone(c.Entrypoint), args...)
}

// manifestDoc is the part of an index or manifest that Pull reads.
type manifestDoc struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
	Config        *descriptor  `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type descriptor struct {
	MediaType string    `json:"mediaType"`
	Digest    string    `json:"digest"`
	Size      int64     `json:"size"`
	URLs      []string  `json:"urls"`
	Platform  *platform `json:"platform"`
}

type platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant"`
}

// configDoc is the part of an image config that Pull reads.
type configDoc struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant"`
	Config       struct {
		Entrypoint []string `json:"Entrypoint"`
		Cmd        []string `json:"Cmd"`
		Env        []string `json:"Env"`
		WorkingDir string   `json:"WorkingDir"`
		User       string   `json:"User"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// Pull fetches the image ref (a tag or a digest) for the platform,
// checks every digest, stores its blobs and unpacks it, unless the store
// already holds its root tree. A reference by digest whose manifest and
// root tree are in the store needs no registry at all. Pulls into one
// store are serialized (across processes too).
func Pull(ctx context.Context, ref string, opts Options) (*Image, error) {
	plat, err := opts.check()
	if err != nil {
		return nil, err
	}
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	if opts.Insecure && !r.Loopback() {
		return nil, fmt.Errorf("registry %s: plain HTTP is allowed to loopback registries only: %w", r.Registry, ErrInsecure)
	}
	st, err := openStore(ctx, opts.Store)
	if err != nil {
		return nil, err
	}
	defer st.close()
	p := &puller{ref: r, opts: opts, limits: opts.Limits.withDefaults(), plat: plat, store: st}
	return p.pull(ctx)
}

type puller struct {
	ref    Ref
	opts   Options
	limits Limits
	plat   Platform
	store  *store
	reg    *repoClient // connected on first use
}

func (p *puller) registry(ctx context.Context) (*repoClient, error) {
	if p.reg == nil {
		reg, err := newRegistry(ctx, p.ref, p.opts)
		if err != nil {
			return nil, err
		}
		p.reg = reg
	}
	return p.reg, nil
}

func (p *puller) progress(format string, args ...any) {
	if p.opts.Progress != nil {
		p.opts.Progress(fmt.Sprintf(format, args...))
	}
}

func (p *puller) pull(ctx context.Context) (*Image, error) {
	img := &Image{Ref: p.ref, Platform: p.plat}
	want := p.ref.Digest
	reference := want
	if reference == "" {
		reference = p.ref.Tag
	}
	raw, digest, err := p.manifest(ctx, reference, want)
	if err != nil {
		return nil, err
	}
	doc, err := parseManifest(raw, digest)
	if err != nil {
		return nil, err
	}
	if doc.Config == nil {
		img.IndexDigest = digest
		child, err := p.pick(doc)
		if err != nil {
			return nil, err
		}
		if raw, digest, err = p.manifest(ctx, child.Digest, child.Digest); err != nil {
			return nil, err
		}
		if doc, err = parseManifest(raw, digest); err != nil {
			return nil, err
		}
		if doc.Config == nil {
			return nil, fmt.Errorf("image %s: index %s lists another index for %s; nested indexes are not supported", p.ref, img.IndexDigest, p.plat)
		}
	}
	img.Digest = digest
	if err := p.checkLayers(doc); err != nil {
		return nil, err
	}
	cfg, err := p.config(ctx, *doc.Config)
	if err != nil {
		return nil, err
	}
	img.Config = Config{
		Entrypoint: cfg.Config.Entrypoint, Cmd: cfg.Config.Cmd, Env: cfg.Config.Env,
		WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User,
	}
	for _, l := range doc.Layers {
		img.Layers = append(img.Layers, l.Digest)
	}
	img.Root = p.store.rootPath(digest)
	if fi, err := os.Lstat(img.Root); err == nil && fi.IsDir() {
		return img, nil
	}
	for i, l := range doc.Layers {
		if !p.store.hasBlob(l.Digest) {
			p.progress("fetching layer %d/%d of %s (%s, %d bytes)", i+1, len(doc.Layers), p.ref, l.Digest, l.Size)
		}
		if err := p.fetchBlob(ctx, l, p.limits.Bytes); err != nil {
			return nil, err
		}
	}
	p.progress("unpacking %s (%d layers)", p.ref, len(doc.Layers))
	notes, err := p.unpack(ctx, doc.Layers, img.Root)
	if err != nil {
		return nil, err
	}
	img.Notes = notes
	return img, nil
}

// manifest returns the manifest or index named by reference and its
// digest; want, if set, is the digest it must have. A manifest by digest
// already in the store is read from there (and checked again).
func (p *puller) manifest(ctx context.Context, reference, want string) ([]byte, string, error) {
	if want != "" {
		if err := checkDigest(want); err != nil {
			return nil, "", fmt.Errorf("image %s: %w", p.ref, err)
		}
		if p.store.hasBlob(want) {
			b, err := p.store.readBlob(want, maxManifestSize)
			if err == nil {
				return b, want, nil
			}
			if !errors.Is(err, ErrDigest) {
				return nil, "", fmt.Errorf("image %s: %w", p.ref, err)
			}
			// A damaged copy: fetch it again.
		}
	}
	reg, err := p.registry(ctx)
	if err != nil {
		return nil, "", err
	}
	b, err := reg.manifest(ctx, reference)
	if err != nil {
		return nil, "", err
	}
	got := sha256Digest(b)
	if want != "" && got != want {
		return nil, "", fmt.Errorf("image %s: manifest %s hashes to %s: %w", p.ref, want, got, ErrDigest)
	}
	if err := p.store.putBlob(strings.NewReader(string(b)), got, int64(len(b)), maxManifestSize); err != nil {
		return nil, "", fmt.Errorf("image %s: %w", p.ref, err)
	}
	return b, got, nil
}

func parseManifest(raw []byte, digest string) (*manifestDoc, error) {
	var doc manifestDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", digest, err)
	}
	if doc.SchemaVersion != 2 {
		return nil, fmt.Errorf("manifest %s: schema version %d; only version 2 is supported", digest, doc.SchemaVersion)
	}
	index := doc.MediaType == mediaOCIIndex || doc.MediaType == mediaDockerList
	manifest := doc.MediaType == mediaOCIManifest || doc.MediaType == mediaDockerManifest
	if doc.MediaType == "" { // optional in OCI: tell by the fields
		index, manifest = doc.Manifests != nil && doc.Config == nil, doc.Config != nil && doc.Manifests == nil
	}
	switch {
	case index && doc.Config == nil:
		doc.Layers = nil
	case manifest && doc.Config != nil:
		doc.Manifests = nil
	default:
		return nil, fmt.Errorf("manifest %s: unsupported media type %q", digest, doc.MediaType)
	}
	return &doc, nil
}

// pick chooses the platform's manifest from an index.
func (p *puller) pick(idx *manifestDoc) (descriptor, error) {
	var have []string
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			continue
		}
		got := Platform{OS: m.Platform.OS, Architecture: m.Platform.Architecture, Variant: m.Platform.Variant}
		if got.OS == p.plat.OS && got.Architecture == p.plat.Architecture && (p.plat.Variant == "" || got.Variant == p.plat.Variant) {
			if m.MediaType != "" && m.MediaType != mediaOCIManifest && m.MediaType != mediaDockerManifest {
				continue // a nested index, or an artifact
			}
			if err := checkDigest(m.Digest); err != nil {
				return descriptor{}, fmt.Errorf("image %s: %w", p.ref, err)
			}
			return m, nil
		}
		if got.OS != "unknown" { // attestation manifests
			have = append(have, got.String())
		}
	}
	return descriptor{}, fmt.Errorf("image %s: no image for %s (the index has: %s; %s): %w",
		p.ref, p.plat, strings.Join(have, ", "), platformHint, ErrNoPlatform)
}

// platformHint says how to run an image of another platform.
const platformHint = "the server's image_platform picks another, which runs where binfmt_misc emulates it (qemu-user-static)"

// layerTypes are the layer media types Pull unpacks.
var layerTypes = []string{
	"application/vnd.oci.image.layer.v1.tar",
	"application/vnd.oci.image.layer.v1.tar+gzip",
	"application/vnd.oci.image.layer.v1.tar+zstd",
	"application/vnd.docker.image.rootfs.diff.tar.gzip",
}

func (p *puller) checkLayers(doc *manifestDoc) error {
	if len(doc.Layers) > p.limits.Layers {
		return fmt.Errorf("image %s: %d layers, over the limit of %d: %w", p.ref, len(doc.Layers), p.limits.Layers, ErrLimit)
	}
	var total int64
	for _, l := range append([]descriptor{*doc.Config}, doc.Layers...) {
		if err := checkDigest(l.Digest); err != nil {
			return fmt.Errorf("image %s: %w", p.ref, err)
		}
		if l.Size < 0 {
			return fmt.Errorf("image %s: blob %s has a negative size: %w", p.ref, l.Digest, ErrHostile)
		}
		total += l.Size
	}
	if total > p.limits.Bytes {
		return fmt.Errorf("image %s: layers of %d bytes, over the limit of %d: %w", p.ref, total, p.limits.Bytes, ErrLimit)
	}
	for _, l := range doc.Layers {
		if len(l.URLs) > 0 || !slices.Contains(layerTypes, l.MediaType) {
			return fmt.Errorf("image %s: layer %s has media type %q, which is not supported (foreign and non-distributable layers are never fetched)", p.ref, l.Digest, l.MediaType)
		}
	}
	return nil
}

// config fetches (or reads) the image config and checks its platform.
func (p *puller) config(ctx context.Context, d descriptor) (*configDoc, error) {
	if err := p.fetchBlob(ctx, d, maxConfigSize); err != nil {
		return nil, err
	}
	b, err := p.store.readBlob(d.Digest, maxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", p.ref, err)
	}
	var cfg configDoc
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("image %s: config %s: %w", p.ref, d.Digest, err)
	}
	if cfg.OS != "" && (cfg.OS != p.plat.OS || cfg.Architecture != p.plat.Architecture) {
		got := Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
		return nil, fmt.Errorf("image %s: built for %s, not %s (%s): %w", p.ref, got, p.plat, platformHint, ErrNoPlatform)
	}
	return &cfg, nil
}

// fetchBlob puts the blob d in the store unless it is there already
// (checked again whenever it is read).
func (p *puller) fetchBlob(ctx context.Context, d descriptor, max int64) error {
	if p.store.hasBlob(d.Digest) {
		return nil
	}
	reg, err := p.registry(ctx)
	if err != nil {
		return err
	}
	body, err := reg.blob(ctx, d.Digest)
	if err != nil {
		return err
	}
	defer body.Close()
	if err := p.store.putBlob(body, d.Digest, d.Size, max); err != nil {
		return fmt.Errorf("image %s: %w", p.ref, err)
	}
	return nil
}
