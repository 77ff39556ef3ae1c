package seccomp

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/bpf"
)

func TestAsmResolvesLabels(t *testing.T) {
	var a asm
	a.add(bpf.LoadAbsolute{Off: 0, Size: 4})
	a.jumpIf(bpf.JumpEqual, 7, "seven")
	a.jumpTo("other")
	a.label("seven")
	a.add(bpf.RetConstant{Val: 7})
	a.label("other")
	a.add(bpf.RetConstant{Val: 1})

	got, err := a.build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	want := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 0, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 7, SkipTrue: 1},
		bpf.Jump{Skip: 1},
		bpf.RetConstant{Val: 7},
		bpf.RetConstant{Val: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("program mismatch (-want +got):\n%s", diff)
	}
}

func TestAsmRejectsBadJumps(t *testing.T) {
	tests := []struct {
		name    string
		prog    func(a *asm)
		wantErr string
	}{
		{"undefined label", func(a *asm) {
			a.jumpTo("nowhere")
			a.add(bpf.RetConstant{})
		}, "undefined label"},
		{"backward", func(a *asm) {
			a.label("top")
			a.add(bpf.LoadConstant{Dst: bpf.RegA, Val: 1})
			a.jumpIf(bpf.JumpEqual, 1, "top")
			a.add(bpf.RetConstant{})
		}, "behind"},
		{"duplicate label", func(a *asm) {
			a.label("x")
			a.add(bpf.RetConstant{})
			a.label("x")
			a.add(bpf.RetConstant{})
		}, "defined twice"},
		{"label at end", func(a *asm) {
			a.jumpTo("end")
			a.add(bpf.RetConstant{})
			a.label("end")
		}, "past the last"},
		{"conditional too far", func(a *asm) {
			a.jumpIf(bpf.JumpEqual, 1, "far")
			for range maxCondSkip + 1 {
				a.add(bpf.LoadConstant{Dst: bpf.RegA, Val: 0})
			}
			a.label("far")
			a.add(bpf.RetConstant{})
		}, "max 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a asm
			tt.prog(&a)
			_, err := a.build()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("build() error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestAsmFarUnconditionalJump(t *testing.T) {
	var a asm
	a.jumpTo("far")
	for range maxCondSkip + 10 {
		a.add(bpf.LoadConstant{Dst: bpf.RegA, Val: 0})
	}
	a.label("far")
	a.add(bpf.RetConstant{Val: 3})
	got, err := a.build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if j, ok := got[0].(bpf.Jump); !ok || j.Skip != maxCondSkip+10 {
		t.Errorf("first instruction = %#v, want Jump{Skip: %d}", got[0], maxCondSkip+10)
	}
}
