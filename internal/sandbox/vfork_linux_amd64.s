#include "textflag.h"

// func rawVfork(trap, a1, a2, a3 uintptr) (r1, errno uintptr)
//
// A clone with CLONE_VM|CLONE_VFORK returns twice on the same stack: the
// child runs first, on the caller's frame, while the parent's thread
// waits. The return address is kept in R12 (each task has its own
// registers), so that what the child pushes below this frame cannot
// change where the parent returns; the results are written after the
// system call returns, in the parent after the child has executed or
// exited. The same as syscall.rawVforkSyscall.
//
// internal/sandbox and internal/sandbox/initproc each keep a copy: a call
// from another package would reach this ABI0 function through a compiler
// wrapper, whose return address the child can overwrite on the shared
// stack before the parent returns through it.
TEXT ·rawVfork(SB),NOSPLIT|NOFRAME,$0-48
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	a3+24(FP), DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	MOVQ	$0, R9
	MOVQ	trap+0(FP), AX
	POPQ	R12
	SYSCALL
	PUSHQ	R12
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, r1+32(FP)
	NEGQ	AX
	MOVQ	AX, errno+40(FP)
	RET
ok:
	MOVQ	AX, r1+32(FP)
	MOVQ	$0, errno+40(FP)
	RET
