package daemon

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"mcpbox/internal/config"
	"mcpbox/internal/image"
	"mcpbox/internal/integrity"
	"mcpbox/internal/sandbox"
	"mcpbox/internal/specconv"
)

// ImageChangedError is an image server whose tag now points to another
// image than the one mcpbox.lock pins: the server is not started until
// `mcpbox update SERVER` shows the change and pins the new image.
type ImageChangedError struct {
	Server, Ref string
	Pinned, Now string // digests
	Lock        string // the lock file's name (mcpbox.lock, NAME.lock)
}

func (e *ImageChangedError) Error() string {
	return fmt.Sprintf("server %s: image %s now points to %s, but %s pins %s: refusing to run an image nobody reviewed; `mcpbox update %s` shows what changes and pins the new image",
		e.Server, e.Ref, e.Now, cmp.Or(e.Lock, "the lock file"), e.Pinned, e.Server)
}

// imageSetup is what preparing image servers needs.
type imageSetup struct {
	stateDir, lockPath string
	// stderr gets the first pull's progress and the pin notes; nil: none.
	stderr io.Writer
	// noRecord pulls an image not pinned yet without pinning it.
	noRecord bool
	// drift, if not nil, gets a line for each image that noRecord left
	// unpinned (pin --check counts them).
	drift *[]string
	// askTimeout bounds asking the registry where a pinned tag points
	// now; zero means defaultAskTimeout.
	askTimeout time.Duration
}

// defaultAskTimeout: a registry that accepts connections but does not
// answer must not hold up the start of a server whose image is pinned and
// stored (nor serve's, for ever).
const defaultAskTimeout = 20 * time.Second

// runnable refuses an image server whose image_platform this host
// cannot run, before anything is pulled or pinned: such an image was
// pinned, then failed with "exec format error".
func runnable(s *config.Server) error {
	if s.Image.Platform == "" {
		return nil
	}
	p, err := image.ParsePlatform(s.Image.Platform)
	if err == nil {
		err = image.CanRun(p)
	}
	if err != nil {
		return fmt.Errorf("server %s: image_platform: %w", s.Name, err)
	}
	return nil
}

// pinnedImage is the image server s runs: the one its lock pins for it, pulled by its digest (no network when the store has it). A tag
// that now points elsewhere is an *ImageChangedError; a registry that
// cannot be asked leaves the pinned image in force, with a note. With no
// pin (or one for another reference or platform) the reference is pulled
// and pinned.
func (is imageSetup) pinnedImage(ctx context.Context, s *config.Server) (*image.Image, error) {
	if err := runnable(s); err != nil {
		return nil, err
	}
	opts := specconv.ImageOptions(s, is.stateDir, is.progress(s.Name))
	ref, err := image.ParseRef(s.Image.Ref)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	lock, err := integrity.ReadLock(is.lockPath)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	pin, ok := lock.Image(s.Name)
	// A digest in the config wins over a pin that says otherwise.
	if !ok || pin.Ref != s.Image.Ref || pin.Platform != platformOf(s) || ref.Digest != "" && pin.Resolved() != ref.Digest {
		return is.pullAndPin(ctx, s, s.Image.Ref, opts)
	}
	if ref.Digest == "" {
		actx, cancel := context.WithTimeout(ctx, cmp.Or(is.askTimeout, defaultAskTimeout))
		now, plat, err := image.ResolvePlatform(actx, s.Image.Ref, opts)
		cancel()
		switch {
		case err == nil && now != pin.Resolved() && plat == pin.Digest:
			// A multi-arch index published again (another platform's
			// image changed, an attestation added): this platform's
			// image is the pinned one, byte for byte.
			is.printf("mcpbox: server %s: %s now points to %s, whose image for %s is the pinned %s: running it ('mcpbox update %s' records the new index)\n",
				s.Name, s.Image.Ref, now, pin.Platform, pin.Digest, s.Name)
		case err == nil && now != pin.Resolved():
			return nil, &ImageChangedError{Server: s.Name, Ref: s.Image.Ref, Pinned: pin.Resolved(), Now: now, Lock: filepath.Base(is.lockPath)}
		case err != nil:
			// Down, hung, or only answering in plain HTTP (which is
			// refused): the pinned digest, checked against the store,
			// is what ran before.
			is.printf("mcpbox: server %s: cannot ask the registry where %s points now (%v); running the pinned %s\n", s.Name, s.Image.Ref, err, pin.Digest)
		}
	}
	img, err := image.Pull(ctx, pinnedRef(ref, pin.Digest), opts)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	return img, nil
}

// pullAndPin pulls ref for s and records it in the lock file.
func (is imageSetup) pullAndPin(ctx context.Context, s *config.Server, ref string, opts image.Options) (*image.Image, error) {
	img, err := image.Pull(ctx, ref, opts)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	for _, n := range img.Notes {
		is.printf("mcpbox: server %s: image %s: %s\n", s.Name, s.Image.Ref, n)
	}
	if is.noRecord {
		is.printf("mcpbox: server %s: image %s is %s (not pinned: nothing is recorded)\n", s.Name, s.Image.Ref, img.Digest)
		if is.drift != nil {
			was := "nothing"
			if lock, err := integrity.ReadLock(is.lockPath); err == nil {
				if pin, ok := lock.Image(s.Name); ok {
					was = pin.Ref + " (" + pin.Platform + ")"
				}
			}
			*is.drift = append(*is.drift, fmt.Sprintf("image of %s: %s (%s) is not pinned: the lock pins %s (mcpbox pin %s records it)", s.Name, s.Image.Ref, platformOf(s), was, s.Name))
		}
		return img, nil
	}
	if err := integrity.SetImagePin(is.lockPath, s.Name, imagePin(s, img)); err != nil {
		return nil, fmt.Errorf("server %s: pinning image %s: %w", s.Name, s.Image.Ref, err)
	}
	is.printf("mcpbox: server %s: pinned image %s at %s in %s\n", s.Name, s.Image.Ref, img.Digest, is.lockPath)
	return img, nil
}

// imagePin is the lock file's record of img, pulled for s.
func imagePin(s *config.Server, img *image.Image) integrity.ImagePin {
	return integrity.ImagePin{Ref: s.Image.Ref, Digest: img.Digest, Index: img.IndexDigest, Platform: platformOf(s)}
}

// platformOf is the platform s's image is pulled for.
func platformOf(s *config.Server) string {
	if s.Image.Platform != "" {
		return s.Image.Platform
	}
	return image.HostPlatform().String()
}

// pinnedRef is ref (its tag kept, for messages) by digest.
func pinnedRef(ref image.Ref, digest string) string {
	ref.Digest = digest
	return ref.String()
}

func (is imageSetup) progress(server string) func(string) {
	if is.stderr == nil {
		return nil
	}
	return func(msg string) { fmt.Fprintf(is.stderr, "mcpbox: server %s: %s\n", server, msg) }
}

func (is imageSetup) printf(format string, args ...any) {
	if is.stderr != nil {
		printLine(is.stderr, format, args...)
	}
}

// printLine prints format with each of args as one line of text that a
// terminal does not act on: the arguments hold what an image's layers
// (entry names), a registry (an error's body) or a package chose, which
// must neither forge a line of mcpbox's nor drive the terminal.
func printLine(w io.Writer, format string, args ...any) {
	safe := make([]any, len(args))
	for i, a := range args {
		safe[i] = config.PrintableLine(fmt.Sprint(a))
	}
	fmt.Fprintf(w, format, safe...)
}

// applyImage makes spec run s's pinned image (or the one w.pulled holds
// for it, for update).
func (w wiring) applyImage(s *config.Server, spec *sandbox.Spec) error {
	img := w.pulled[s.Name]
	if img == nil {
		ctx := w.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		var err error
		if img, err = w.images.pinnedImage(ctx, s); err != nil {
			return err
		}
	}
	return specconv.ApplyImage(spec, s, img)
}

func init() {
	updaters = append(updaters, updater{kind: "image", match: func(s *config.Server) bool { return s.Image.Ref != "" }, check: checkImageUpdate})
}

// checkImageUpdate asks the registry what s's image reference points to
// now and, when that is not the pinned image, pulls it (by the digest it
// resolved to) and lists the server's definitions run from it.
func checkImageUpdate(ctx context.Context, o ListOptions, s *config.Server) (*Update, error) {
	if err := runnable(s); err != nil {
		return nil, err
	}
	lockPath, err := o.lockPath()
	if err != nil {
		return nil, err
	}
	is := imageSetup{stateDir: o.StateDir, lockPath: lockPath, stderr: o.Stderr}
	opts := specconv.ImageOptions(s, o.StateDir, is.progress(s.Name))
	ref, err := image.ParseRef(s.Image.Ref)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	lock, err := integrity.ReadLock(lockPath)
	if err != nil {
		return nil, err
	}
	u := &Update{Server: s.Name, Kind: "image", What: s.Image.Ref}
	if pin, ok := lock.Image(s.Name); ok && pin.Ref == s.Image.Ref && pin.Platform == platformOf(s) {
		u.Old = pin.Resolved()
	}
	if u.New, err = image.Resolve(ctx, s.Image.Ref, opts); err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	if !u.Changed() {
		return u, nil
	}
	img, err := image.Pull(ctx, pinnedRef(ref, u.New), opts)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", s.Name, err)
	}
	u.Definitions, err = definitionsWith(ctx, o, s, func(w *wiring) { w.pulled = map[string]*image.Image{s.Name: img} })
	if err != nil {
		return nil, fmt.Errorf("server %s: starting it from %s: %w", s.Name, u.New, err)
	}
	u.pin = func() error { return integrity.SetImagePin(lockPath, s.Name, imagePin(s, img)) }
	return u, nil
}
