package pkginstall

import "testing"

func TestPEP440(t *testing.T) {
	ordered := []string{"0.9", "1.0.dev1", "1.0a1", "1.0a2", "1.0b1", "1.0rc1", "1.0", "1.0.post1", "1.0.1", "1.2", "1.10"}
	for i := range ordered {
		for j := range ordered {
			want := cmpInt(i, j)
			if got := pep440Compare(ordered[i], ordered[j]); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	if pep440Compare("1.0", "1.0.0") != 0 {
		t.Error("1.0 != 1.0.0")
	}
	for _, tt := range []struct {
		v, spec string
		want    bool
	}{
		{"1.4.5", "~=1.4.2", true},
		{"1.5.0", "~=1.4.2", false},
		{"1.4.1", "~=1.4.2", false},
		{"2.3", "~=2.2", true},
		{"3.0", "~=2.2", false},
		{"1.2.3", ">=1.0,<2", true},
		{"2.0", ">=1.0,<2", false},
		{"1.2.3", "==1.2.*", true},
		{"1.20", "==1.2.*", false},
		{"1.2.3", "!=1.2.3", false},
		{"0.6.2", "==0.6.2", true},
		{"1", ">1", false},
		{"1", "1", false}, // no operator
	} {
		if got := matchSpecifiers(tt.v, tt.spec); got != tt.want {
			t.Errorf("matchSpecifiers(%s, %q) = %v", tt.v, tt.spec, got)
		}
	}
}
