package landlock

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The expected masks are written out from the kernel's
// Documentation/userspace-api/landlock.rst, not derived from the code.
func TestHandledFS(t *testing.T) {
	tests := []struct {
		abi  int
		want Access
	}{
		{abi: -1, want: 0},
		{abi: 0, want: 0},
		{abi: 1, want: 0x1fff},
		{abi: 2, want: 0x3fff},  // + refer
		{abi: 3, want: 0x7fff},  // + truncate
		{abi: 4, want: 0x7fff},  // net only
		{abi: 5, want: 0xffff},  // + ioctl_dev
		{abi: 6, want: 0xffff},  // scopes only
		{abi: 7, want: 0xffff},  // audit flags only
		{abi: 8, want: 0xffff},  // tsync only
		{abi: 9, want: 0x1ffff}, // + resolve_unix
		{abi: 12, want: 0x1ffff},
	}
	for _, tt := range tests {
		if got := handledFS(tt.abi); got != tt.want {
			t.Errorf("handledFS(%d) = %#x (%v), want %#x (%v)", tt.abi, uint64(got), got, uint64(tt.want), tt.want)
		}
	}
}

func TestRuleAccess(t *testing.T) {
	tests := []struct {
		name  string
		in    Access
		abi   int
		isDir bool
		want  Access
	}{
		{name: "dir keeps all on ABI 7", in: Read | Write | Exec, abi: 7, isDir: true, want: Read | Write | Exec},
		{name: "dir drops truncate on ABI 2", in: Write, abi: 2, isDir: true, want: Write &^ Truncate},
		{name: "dir drops refer and truncate on ABI 1", in: Write, abi: 1, isDir: true, want: Write &^ (Truncate | Refer)},
		{name: "file keeps file rights", in: Read | Write | Exec | IoctlDev, abi: 7, want: ReadFile | WriteFile | Truncate | Execute | IoctlDev},
		{name: "file drops ioctl on ABI 4", in: ReadFile | IoctlDev, abi: 4, want: ReadFile},
		{name: "file with only dir rights is empty", in: ReadDir | MakeReg | Refer, abi: 7, want: 0},
		{name: "resolve_unix only from ABI 9", in: ResolveUnix, abi: 8, isDir: true, want: 0},
		{name: "resolve_unix on a socket file", in: ResolveUnix | ReadDir, abi: 9, want: ResolveUnix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ruleAccess(tt.in, tt.abi, tt.isDir); got != tt.want {
				t.Errorf("ruleAccess(%v, %d, %v) = %v, want %v", tt.in, tt.abi, tt.isDir, got, tt.want)
			}
		})
	}
}

func TestGroups(t *testing.T) {
	tests := []struct {
		name string
		got  Access
		want string
	}{
		{name: "Read", got: Read, want: "read_file|read_dir"},
		{name: "Exec", got: Exec, want: "execute"},
		{name: "Write", got: Write, want: "write_file|remove_dir|remove_file|make_char|make_dir|make_reg|" +
			"make_sock|make_fifo|make_block|make_sym|refer|truncate"},
		{name: "none", got: 0, want: "none"},
		{name: "unknown bits", got: ReadFile | 1<<40, want: "read_file|0x10000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.got.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
	if Read&Write != 0 || Read&Exec != 0 || Write&Exec != 0 {
		t.Errorf("groups overlap: Read=%v Write=%v Exec=%v", Read, Write, Exec)
	}
	if All != Read|Write|Exec|IoctlDev|ResolveUnix {
		t.Errorf("All = %v, want the groups plus ioctl_dev and resolve_unix", All)
	}
}

func TestRulesetAttrSize(t *testing.T) {
	for abi, want := range map[int]uintptr{1: 8, 3: 8, 4: 16, 5: 16, 6: 24, 7: 24, 9: 24} {
		if got := rulesetAttrSize(abi); got != want {
			t.Errorf("rulesetAttrSize(%d) = %d, want %d", abi, got, want)
		}
	}
}

func TestUnenforced(t *testing.T) {
	full := Policy{ScopeSignals: true, ScopeAbstractUnix: true, Net: &NetPolicy{}}
	tests := []struct {
		name string
		p    Policy
		abi  int
		want []string
	}{
		{name: "unavailable", p: full, abi: 0, want: []string{"landlock is unavailable: no filesystem restriction"}},
		{name: "full policy on ABI 9", p: full, abi: 9, want: nil},
		{name: "full policy on ABI 7", p: full, abi: 7, want: []string{
			"restricting connects to pathname unix sockets needs landlock ABI 9 (have 7)",
		}},
		{name: "full policy on ABI 3", p: full, abi: 3, want: []string{
			"restricting TCP bind and connect needs landlock ABI 4 (have 3)",
			"restricting device ioctls needs landlock ABI 5 (have 3)",
			"scoping signals needs landlock ABI 6 (have 3)",
			"scoping abstract unix sockets needs landlock ABI 6 (have 3)",
			"restricting connects to pathname unix sockets needs landlock ABI 9 (have 3)",
		}},
		{name: "plain policy on ABI 1", p: Policy{}, abi: 1, want: []string{
			"allowing links and renames across directories needs landlock ABI 2 (have 1)",
			"restricting truncate needs landlock ABI 3 (have 1)",
			"restricting device ioctls needs landlock ABI 5 (have 1)",
			"restricting connects to pathname unix sockets needs landlock ABI 9 (have 1)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.p.Unenforced(tt.abi)); diff != "" {
				t.Errorf("Unenforced(%d) mismatch (-want +got):\n%s", tt.abi, diff)
			}
		})
	}
}
