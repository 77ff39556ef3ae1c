#include "textflag.h"

// func getNofile(lim *[2]uint64) uintptr
TEXT ·getNofile(SB),NOSPLIT,$0-16
	MOVQ	$0, DI		// this process
	MOVQ	$7, SI		// RLIMIT_NOFILE
	MOVQ	$0, DX		// no new limit
	MOVQ	lim+0(FP), R10	// the old one
	MOVQ	$302, AX	// SYS_prlimit64
	SYSCALL
	MOVQ	AX, ret+8(FP)
	RET
