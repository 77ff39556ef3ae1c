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
