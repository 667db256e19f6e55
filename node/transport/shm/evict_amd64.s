#include "textflag.h"

// func evictOpt(p unsafe.Pointer, n uintptr)
TEXT ·evictOpt(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ AX, CX
loop:
	CMPQ AX, CX
	JAE  done
	CLFLUSHOPT (AX)
	ADDQ $64, AX
	JMP  loop
done:
	RET

// func evictFlush(p unsafe.Pointer, n uintptr)
TEXT ·evictFlush(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ AX, CX
loop:
	CMPQ AX, CX
	JAE  done
	CLFLUSH (AX)
	ADDQ $64, AX
	JMP  loop
done:
	RET

// func cpuid7ebx() uint32
TEXT ·cpuid7ebx(SB), NOSPLIT, $0-4
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL BX, ret+0(FP)
	RET
