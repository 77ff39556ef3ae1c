package daemon

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"mcpbox/internal/config"
)

// TestImageNotesPrintable: an image's layer names its entries, and the
// pull's notes about them ("skipped /NAME: ...") reach serve's stderr.
// A name that clears the screen, forges an "ok" line of mcpbox's and
// hides what follows is printed escaped, on its one line.
func TestImageNotesPrintable(t *testing.T) {
	_, host, is, stderr := imageRig(t)
	hostile := "x\x1b[2J\x1b[H\nmcpbox: server img: all good\x1b[8m"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: hostile, Typeflag: tar.TypeFifo, Mode: 0o644, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(hostImage(t), layer)
	if err != nil {
		t.Fatal(err)
	}
	s := &config.Server{Name: "img", Image: config.ImageSource{Ref: host + "/t/hostile:v1", Insecure: true}}
	r, err := name.ParseReference(s.Image.Ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	if _, err := is.pinnedImage(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	out := stderr.String()
	if !strings.Contains(out, `skipped /x\x1b[2J\x1b[H\nmcpbox: server img: all good\x1b[8m: device nodes and fifos`) {
		t.Errorf("the note of the hostile entry is not printed escaped on its line:\n%q", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.ContainsRune(line, 0x1b) || strings.HasPrefix(line, "mcpbox: server img: all good") {
			t.Errorf("a line of stderr the image wrote: %q", line)
		}
	}
}
