package sandbox

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInputMasks(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want []string
	}{
		{"output inside input", Spec{Input: "/p", Output: "/p/mcpbox-out"}, []string{"mcpbox-out"}},
		{"deep output", Spec{Input: "/p/", Output: "/p/a/b/out"}, []string{"a/b/out"}},
		{"input is /", Spec{Input: "/", Output: "/home/out"}, []string{"home/out"}},
		{"output beside input", Spec{Input: "/p", Output: "/p2/out"}, nil},
		{"output is input", Spec{Input: "/p", Output: "/p"}, nil},
		{"input inside output", Spec{Input: "/p/in", Output: "/p"}, nil},
		{"no input", Spec{Output: "/p/out"}, nil},
		{"overlaid input", Spec{Input: "/p", Output: "/p/out", InputOverlay: &Overlay{Upper: "/s/u", Work: "/s/w"}}, []string{"out"}},
		{"mounts", Spec{Input: "/p", Mounts: []Mount{
			{Source: "/p/cache", Target: "/cache", Writable: true},
			{Source: "/p/docs", Target: "/docs"}, // read-only: harmless twice
			{Source: "/p/cache", Target: "/cache2", Writable: true},
			{Source: "/p/b", Target: "/b", Writable: true},
		}}, []string{"b", "cache"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, tt.spec.InputMasks()); d != "" {
				t.Errorf("InputMasks (-want +got):\n%s", d)
			}
		})
	}
}
