//go:build linux && amd64

#include "textflag.h"

// func clockGettime()
//
// Called by the runtime as the vDSO's clock_gettime, with the C calling
// convention: DI the clock, SI the struct timespec to fill; AX returned.
// It calls the real vDSO function, then adds offsetRealtime to
// CLOCK_REALTIME (0) and offsetMonotonic to CLOCK_MONOTONIC (1). It uses
// only registers the C convention lets a callee clobber (AX, CX, DX, SI,
// DI, R8, R9), on the stack it was called on (g0's, aligned).
TEXT ·clockGettime(SB),NOSPLIT|NOFRAME,$0-0
	PUSHQ	DI
	PUSHQ	SI
	SUBQ	$8, SP	// 16-byte alignment for the call
	MOVQ	·realClockGettime(SB), AX
	CALL	AX
	ADDQ	$8, SP
	POPQ	SI
	POPQ	DI
	MOVQ	AX, R8	// the vDSO's return value
	CMPQ	DI, $0
	JNE	notrealtime
	MOVQ	·offsetRealtime(SB), R9
	JMP	apply
notrealtime:
	CMPQ	DI, $1
	JNE	done
	MOVQ	·offsetMonotonic(SB), R9
apply:
	CMPQ	R9, $0
	JEQ	done
	MOVQ	0(SI), AX	// tv_sec
	IMULQ	$1000000000, AX
	ADDQ	8(SI), AX	// + tv_nsec
	ADDQ	R9, AX	// + offset
	CQO
	MOVQ	$1000000000, CX
	IDIVQ	CX	// AX seconds, DX nanoseconds (signed)
	CMPQ	DX, $0
	JGE	store
	ADDQ	CX, DX
	DECQ	AX
store:
	MOVQ	AX, 0(SI)
	MOVQ	DX, 8(SI)
done:
	MOVQ	R8, AX
	RET

// func clockGettimeAddr() uintptr
TEXT ·clockGettimeAddr(SB),NOSPLIT,$0-8
	MOVQ	$·clockGettime(SB), AX
	MOVQ	AX, ret+0(FP)
	RET
