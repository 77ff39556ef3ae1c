//go:build linux

package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRestore restores a snapshot whose entries after the metadata are
// arbitrary bytes. Properties: nothing appears outside dst, and dst holds
// only directories, files, symlinks and (in the overlay part, which keeps
// overlay marks) whiteouts.
func FuzzRestore(f *testing.F) {
	hostile := []tarEntry{
		{tar.Header{Typeflag: tar.TypeSymlink, Name: "output/l", Linkname: ".."}, ""},
		reg("output/l/x", "evil"),
		{tar.Header{Typeflag: tar.TypeLink, Name: "output/h", Linkname: "output/l/x"}, ""},
		reg("overlay/etc/gone", ""),
		{tar.Header{Typeflag: tar.TypeReg, Name: "overlay/w", PAXRecords: map[string]string{paxWhiteout: "1"}}, ""},
		{tar.Header{Typeflag: tar.TypeDir, Name: "overlay/o/", PAXRecords: map[string]string{paxOpaque: "trusted.overlay.opaque"}}, ""},
		{tar.Header{Typeflag: tar.TypeDir, Name: "output/d/", Mode: 0o000}, ""},
		reg("output/d/e", "in a 000 dir"),
		reg("output/../../x", "escape"),
		{tar.Header{Typeflag: tar.TypeChar, Name: "output/null", Devmajor: 1, Devminor: 3}, ""},
	}
	f.Add(makeTarBytes(f, []tarEntry{reg("output/a", "b"), reg("overlay/c", "d")}, false), false)
	f.Add(makeTarBytes(f, hostile, false), false)
	f.Add(makeTarBytes(f, hostile, false), true)
	var meta bytes.Buffer
	tw := tar.NewWriter(&meta)
	body, _ := json.Marshal(Meta{Version: 1, Parts: []string{"output", "overlay"}})
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: MetaName, Mode: 0o644, Size: int64(len(body))}); err != nil {
		f.Fatal(err)
	}
	tw.Write(body)
	tw.Flush() // no trailer: the fuzzed entries follow
	saved := restoreLimits
	restoreLimits = limits{entries: 200, bytes: 1 << 20}
	f.Cleanup(func() { restoreLimits = saved })
	f.Fuzz(func(t *testing.T, data []byte, overlay bool) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(meta.Bytes())
		zw.Write(data)
		zw.Close()
		path := filepath.Join(t.TempDir(), "s.tar.gz")
		if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		part := "output"
		if overlay {
			part = "overlay"
		}
		dst, clean := jail(t)
		Restore(path, part, dst) // errors are fine; escapes and devices are not
		if err := clean(); err != nil {
			t.Fatal(err)
		}
		for rel, what := range state(t, dst) {
			ok := strings.HasPrefix(what, "dir") || strings.HasPrefix(what, "file") || strings.HasPrefix(what, "link")
			if !ok && !(overlay && what == "chr 0") {
				t.Errorf("%s is %s", rel, what)
			}
		}
		// Let t.TempDir clean up a 000 dir.
		filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				os.Chmod(p, 0o700)
			}
			return nil
		})
	})
}
