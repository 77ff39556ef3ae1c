#include "textflag.h"

// func getNofile(lim *[2]uint64) uintptr
TEXT ·getNofile(SB),NOSPLIT,$0-16
	MOVD	$0, R0		// this process
	MOVD	$7, R1		// RLIMIT_NOFILE
	MOVD	$0, R2		// no new limit
	MOVD	lim+0(FP), R3	// the old one
	MOVD	$261, R8	// SYS_prlimit64
	SVC
	MOVD	R0, ret+8(FP)
	RET
