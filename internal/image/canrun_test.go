package image

import (
	"os"
	"strings"
	"testing"
)

// TestCanRun: the host's platform runs; another architecture does only
// with a binfmt_misc handler for it, and the refusal says which handler.
func TestCanRun(t *testing.T) {
	if err := CanRun(HostPlatform()); err != nil {
		t.Errorf("the host's platform: %v", err)
	}
	if err := CanRun(Platform{OS: "windows", Architecture: HostPlatform().Architecture}); err == nil {
		t.Error("a windows image can run here")
	}
	foreign := Platform{OS: "linux", Architecture: "s390x"}
	if HostPlatform().Architecture == "s390x" {
		foreign.Architecture = "riscv64"
	}
	if _, err := os.Stat("/proc/sys/fs/binfmt_misc/qemu-" + binfmtNames[foreign.Architecture]); err == nil {
		t.Skipf("this host has a binfmt_misc handler for %s", foreign.Architecture)
	}
	if err := CanRun(foreign); err == nil || !strings.Contains(err.Error(), "no binfmt_misc handler for it (qemu-"+binfmtNames[foreign.Architecture]) {
		t.Errorf("an image for %s: %v, want a refusal naming the handler", foreign, err)
	}
}

// TestCanRunHandlers: a foreign architecture runs with an enabled
// handler that has the F flag; one without it, or disabled, is refused
// with why.
func TestCanRunHandlers(t *testing.T) {
	host := Platform{OS: "linux", Architecture: "amd64"}
	arm := Platform{OS: "linux", Architecture: "arm64"}
	for _, tt := range []struct {
		entry string // qemu-aarch64's; "": none
		want  string // in the error; "": runs
	}{
		{"enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: POCF\noffset 0\n", ""},
		{"enabled\ninterpreter /usr/bin/qemu-aarch64-static\nflags: OC\noffset 0\n", "lacks the F flag"},
		{"disabled\ninterpreter /usr/bin/qemu-aarch64-static\nflags: F\n", "no binfmt_misc handler for it (qemu-aarch64"},
		{"", "no binfmt_misc handler for it (qemu-aarch64"},
	} {
		err := canRun(arm, host, func(name string) ([]byte, error) {
			if name != "qemu-aarch64" || tt.entry == "" {
				return nil, os.ErrNotExist
			}
			return []byte(tt.entry), nil
		})
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("handler %q: %v, want %q", tt.entry, err, tt.want)
		}
	}
	if err := canRun(Platform{OS: "linux", Architecture: "386"}, host, nil); err != nil {
		t.Errorf("386 on amd64: %v", err)
	}
}
