package sandbox

import (
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckOverlay(t *testing.T) {
	ov := func(u, w string) *Overlay { return &Overlay{Upper: u, Work: w} }
	tests := []struct {
		name  string
		input string
		ov    *Overlay
		msg   string // "" means accepted
	}{
		{"none", "/src", nil, ""},
		{"siblings", "/src", ov("/s/ws/upper", "/s/ws/work"), ""},
		{"cousins", "/src", ov("/s/a/upper", "/s/b/work"), ""},
		{"no input", "", ov("/s/upper", "/s/work"), "without an input"},
		{"relative", "/src", ov("s/upper", "/s/work"), "absolute"},
		{"unclean", "/src", ov("/s/../upper", "/s/work"), "absolute and clean"},
		{"root", "/src", ov("/", "/s/work"), "not /"},
		{"same", "/src", ov("/s/x", "/s/x"), "overlap"},
		{"work in upper", "/src", ov("/s/upper", "/s/upper/work"), "overlap"},
		{"upper in input", "/src", ov("/src/upper", "/s/work"), "overlap"},
		{"input in work", "/s/work/src", ov("/s/upper", "/s/work"), "overlap"},
		{"comma", "/src", ov("/s/up,per", "/s/work"), "','"},
		{"colon", "/src", ov("/s/upper", "/s/wo:rk"), "','"},
		// Only the part below the common parent reaches the option string.
		{"comma above", "/src", ov("/a,b/upper", "/a,b/work"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Spec{Input: tt.input, InputOverlay: tt.ov}
			err := s.checkOverlay()
			if tt.msg == "" && err != nil || tt.msg != "" && (err == nil || !strings.Contains(err.Error(), tt.msg)) {
				t.Fatalf("checkOverlay: %v, want %q", err, tt.msg)
			}
		})
	}
}

func TestLayerRoot(t *testing.T) {
	for _, tt := range []struct{ a, b, root, relA, relB string }{
		{"/s/ws/upper", "/s/ws/work", "/s/ws", "upper", "work"},
		{"/s/a/upper", "/s/b/w/work", "/s", "a/upper", "b/w/work"},
		{"/upper", "/work", "/", "upper", "work"},
		{"/ab/upper", "/a/work", "/", "ab/upper", "a/work"},
	} {
		root, relA, relB := layerRoot(tt.a, tt.b)
		if diff := cmp.Diff([]string{tt.root, tt.relA, tt.relB}, []string{root, relA, relB}); diff != "" {
			t.Errorf("layerRoot(%q, %q) (-want +got):\n%s", tt.a, tt.b, diff)
		}
	}
}

// FuzzLayerRoot checks layerRoot against the definition: the deepest
// directory both paths lie beneath, found component by component.
func FuzzLayerRoot(f *testing.F) {
	f.Add("/s/ws/upper", "/s/ws/work")
	f.Add("/ab/c", "/a/c")
	f.Add("/x", "/y/z")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !path.IsAbs(a) || !path.IsAbs(b) || path.Clean(a) != a || path.Clean(b) != b || within(a, b) || within(b, a) {
			return
		}
		root, relA, relB := layerRoot(a, b)
		ca, cb := strings.Split(a, "/")[1:], strings.Split(b, "/")[1:]
		n := 0
		for n < len(ca)-1 && n < len(cb)-1 && ca[n] == cb[n] {
			n++
		}
		want := "/" + strings.Join(ca[:n], "/")
		if root != want || path.Join(root, relA) != a || path.Join(root, relB) != b {
			t.Fatalf("layerRoot(%q, %q) = %q, %q, %q; want root %q", a, b, root, relA, relB, want)
		}
	})
}

func TestLandlockRulesInputOverlay(t *testing.T) {
	for _, execWritable := range []bool{false, true} {
		s := Spec{Input: "/src", InputOverlay: &Overlay{Upper: "/o/upper", Work: "/o/work"}, ExecWritable: execWritable}
		var got *pathRule
		for _, r := range s.landlockRules(nil) {
			if r.Path == InputDir {
				got = &r
			}
		}
		want := &pathRule{Path: InputDir, Read: true, Write: true, Exec: execWritable}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ExecWritable %v: input rule (-want +got):\n%s", execWritable, diff)
		}
	}
}
