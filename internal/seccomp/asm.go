package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// maxCondSkip is the farthest a conditional BPF jump can reach: its skip
// counts are 8 bits wide.
const maxCondSkip = 255

// asm collects BPF instructions whose jump targets are named labels and
// resolves them to relative skips, so that the policy reads top to bottom
// without hand-counted offsets. Classic BPF only jumps forward; build
// rejects backward or out-of-range jumps instead of emitting a wrong
// program.
type asm struct {
	insns  []bpf.Instruction
	refs   []labelRef
	labels map[string]int
	err    error // first misuse, reported by build
}

// labelRef is a jump at index at whose taken branch goes to label target.
type labelRef struct {
	at     int
	target string
}

// add appends instructions that do not jump.
func (a *asm) add(insns ...bpf.Instruction) {
	a.insns = append(a.insns, insns...)
}

// label names the position of the next instruction.
func (a *asm) label(name string) {
	if a.labels == nil {
		a.labels = make(map[string]int)
	}
	if _, dup := a.labels[name]; dup && a.err == nil {
		a.err = fmt.Errorf("label %q defined twice", name)
	}
	a.labels[name] = len(a.insns)
}

// jumpIf appends a conditional jump on register A: to target if A cond val
// holds, else to the next instruction.
func (a *asm) jumpIf(cond bpf.JumpTest, val uint32, target string) {
	a.refs = append(a.refs, labelRef{at: len(a.insns), target: target})
	a.insns = append(a.insns, bpf.JumpIf{Cond: cond, Val: val})
}

// jumpTo appends an unconditional jump to target.
func (a *asm) jumpTo(target string) {
	a.refs = append(a.refs, labelRef{at: len(a.insns), target: target})
	a.insns = append(a.insns, bpf.Jump{})
}

// build resolves all label references and returns the program.
func (a *asm) build() ([]bpf.Instruction, error) {
	if a.err != nil {
		return nil, a.err
	}
	out := append([]bpf.Instruction(nil), a.insns...)
	for _, r := range a.refs {
		dst, ok := a.labels[r.target]
		if !ok {
			return nil, fmt.Errorf("resolving jump at %d: undefined label %q", r.at, r.target)
		}
		if dst >= len(out) {
			return nil, fmt.Errorf("resolving jump at %d: label %q is past the last instruction", r.at, r.target)
		}
		skip := dst - (r.at + 1)
		if skip < 0 {
			return nil, fmt.Errorf("resolving jump at %d: label %q is behind it", r.at, r.target)
		}
		switch ins := out[r.at].(type) {
		case bpf.JumpIf:
			if skip > maxCondSkip {
				return nil, fmt.Errorf("resolving jump at %d: label %q is %d instructions away, max %d", r.at, r.target, skip, maxCondSkip)
			}
			ins.SkipTrue = uint8(skip)
			out[r.at] = ins
		case bpf.Jump:
			ins.Skip = uint32(skip)
			out[r.at] = ins
		}
	}
	return out, nil
}
