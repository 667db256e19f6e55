#include "textflag.h"

// func castagnoli3(ca, cb, cc uint32, a, b, c *byte, words int) (uint32, uint32, uint32)
//
// Invariant: R10 is the byte offset of the next word in each buffer, R9
// the offset the loop ends at; AX, BX and CX are the CRCs of each buffer's
// bytes before R10. The three CRC32Q are independent, so they overlap.
TEXT ·castagnoli3(SB), NOSPLIT, $0-60
	MOVL ca+0(FP), AX
	MOVL cb+4(FP), BX
	MOVL cc+8(FP), CX
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DI
	MOVQ c+32(FP), R8
	MOVQ words+40(FP), R9
	SHLQ $3, R9
	XORQ R10, R10
loop:
	CRC32Q (SI)(R10*1), AX
	CRC32Q (DI)(R10*1), BX
	CRC32Q (R8)(R10*1), CX
	ADDQ $8, R10
	CMPQ R10, R9
	JB   loop
	MOVL AX, ret+48(FP)
	MOVL BX, ret1+52(FP)
	MOVL CX, ret2+56(FP)
	RET
