package daemon

import (
	"runtime/debug"
	"testing"
)

// TestStampedVersion: a build without -X Version reports the commit the
// go command stamped, so that two "dev" builds can be told apart.
func TestStampedVersion(t *testing.T) {
	stamp := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	rev := "2ca0d981754f0123456789abcdef0123456789ab"
	for _, tt := range []struct {
		v    string
		bi   *debug.BuildInfo
		want string
	}{
		{"dev", nil, "dev"},
		{"dev", stamp(), "dev"},
		{"dev", stamp("vcs.revision", rev, "vcs.modified", "false"), "dev+2ca0d981754f"},
		{"dev", stamp("vcs.revision", rev, "vcs.modified", "true"), "dev+2ca0d981754f-dirty"},
		{"1.4.0", stamp("vcs.revision", rev), "1.4.0"},
	} {
		if got := stampedVersion(tt.v, tt.bi); got != tt.want {
			t.Errorf("stampedVersion(%q, %v) = %q, want %q", tt.v, tt.bi, got, tt.want)
		}
	}
}
