//go:build !noasm && !gccgo && !safe

#include "textflag.h"

// func mulPacked(p, x, acc []float64)
//
// Registers: SI row i of p (Pᵢᵢ first), R11 = SI − 8i (row term j at
// R11 + 8j), DI x, DX acc, R8 d, R9 full = d − d mod 4, R12 8d (the
// stride between lanes), R10 i, AX j, BX &acc[i] (row i's sum l at
// BX + l·R12), R13 the lane row i's terms of later rows go to, X6 {xᵢ, xᵢ}.
// The aligned middle keeps row i's four sums as gonum's DotUnitary keeps
// its own, X7 = {s0, s1} and X8 = {s2, s3}. Every product is rounded
// (MULSD, MULPD) before it is added (ADDSD, ADDPD).
TEXT ·mulPacked(SB), NOSPLIT, $0-72
	MOVQ p_base+0(FP), SI
	MOVQ x_base+24(FP), DI
	MOVQ x_len+32(FP), R8
	MOVQ acc_base+48(FP), DX
	MOVQ R8, R9
	ANDQ $-4, R9
	MOVQ R8, R12
	SHLQ $3, R12
	XORQ R10, R10

row:
	CMPQ   R10, R8
	JGE    end
	MOVSD  (DI)(R10*8), X6
	SHUFPD $0, X6, X6
	XORQ   CX, CX              // lane: i mod 4 before full, else 0
	CMPQ   R10, R9
	JGE    lane
	MOVQ   R10, CX
	ANDQ   $3, CX

lane:
	IMULQ R12, CX
	LEAQ  (DX)(CX*1), R13
	LEAQ  (DX)(R10*8), BX
	MOVQ  R10, R11
	SHLQ  $3, R11
	NEGQ  R11
	ADDQ  SI, R11

	// The diagonal: term i of row i.
	MOVSD (SI), X0
	MULSD X6, X0
	ADDSD (R13)(R10*8), X0
	MOVSD X0, (R13)(R10*8)
	LEAQ  1(R10), AX

head: // j not a multiple of 4, before full: one term at a time
	CMPQ  AX, R8
	JGE   next
	CMPQ  AX, R9
	JGE   tail
	MOVQ  AX, CX
	ANDQ  $3, CX
	JZ    middle
	IMULQ R12, CX
	MOVSD (R11)(AX*8), X0
	MOVSD (DI)(AX*8), X1
	MULSD X0, X1
	ADDSD (BX)(CX*1), X1       // row i's sum j mod 4
	MOVSD X1, (BX)(CX*1)
	MULSD X6, X0
	ADDSD (R13)(AX*8), X0      // row j's sum for term i
	MOVSD X0, (R13)(AX*8)
	INCQ  AX
	JMP   head

middle: // j … full−1, four terms at a time
	MOVSD  (BX), X7
	MOVHPD (BX)(R12*1), X7
	LEAQ   (BX)(R12*2), CX
	MOVSD  (CX), X8
	MOVHPD (CX)(R12*1), X8
	MOVQ   R9, CX
	SUBQ   AX, CX
	SHRQ   $2, CX

loop:
	MOVUPD 0(R11)(AX*8), X0
	MOVUPD 16(R11)(AX*8), X1
	MOVUPD 0(DI)(AX*8), X2
	MOVUPD 16(DI)(AX*8), X3
	MULPD  X0, X2
	MULPD  X1, X3
	ADDPD  X2, X7
	ADDPD  X3, X8
	MULPD  X6, X0
	MULPD  X6, X1
	MOVUPD 0(R13)(AX*8), X4
	MOVUPD 16(R13)(AX*8), X5
	ADDPD  X0, X4
	ADDPD  X1, X5
	MOVUPD X4, 0(R13)(AX*8)
	MOVUPD X5, 16(R13)(AX*8)
	ADDQ   $4, AX
	DECQ   CX
	JNZ    loop

	MOVSD  X7, (BX)
	MOVHPD X7, (BX)(R12*1)
	LEAQ   (BX)(R12*2), CX
	MOVSD  X8, (CX)
	MOVHPD X8, (CX)(R12*1)

tail: // j ≥ full: the first sum
	CMPQ  AX, R8
	JGE   next
	MOVSD (R11)(AX*8), X0
	MOVSD (DI)(AX*8), X1
	MULSD X0, X1
	ADDSD (BX), X1
	MOVSD X1, (BX)
	MULSD X6, X0
	ADDSD (R13)(AX*8), X0
	MOVSD X0, (R13)(AX*8)
	INCQ  AX
	JMP   tail

next:
	MOVQ R8, CX
	SUBQ R10, CX
	LEAQ (SI)(CX*8), SI
	INCQ R10
	JMP  row

end:
	RET

// func rankOnePacked(p, q []float64, inv, invC float64)
//
// Registers: SI row i of p (Pᵢᵢ first), R11 = SI − 8i (row term j at
// R11 + 8j), DI q, R8 d, R10 i, AX j, X6 {qᵢ, qᵢ}, X5 {inv, inv}, X4 1/c.
// Each entry is Pᵢⱼ − (qᵢqⱼ)·inv with every product rounded; the diagonal
// is Pᵢᵢ + (1/c − (qᵢqᵢ)·inv).
TEXT ·rankOnePacked(SB), NOSPLIT, $0-64
	MOVQ   p_base+0(FP), SI
	MOVQ   q_base+24(FP), DI
	MOVQ   q_len+32(FP), R8
	MOVSD  inv+48(FP), X5
	SHUFPD $0, X5, X5
	MOVSD  invC+56(FP), X4
	XORQ   R10, R10

rrow:
	CMPQ   R10, R8
	JGE    rend
	MOVSD  (DI)(R10*8), X6
	MOVSD  X6, X0
	MULSD  X6, X0              // qᵢqᵢ
	MULSD  X5, X0              // ·inv
	MOVSD  X4, X1
	SUBSD  X0, X1              // 1/c − (qᵢqᵢ)·inv
	ADDSD  (SI), X1
	MOVSD  X1, (SI)
	SHUFPD $0, X6, X6
	MOVQ   R10, R11
	SHLQ   $3, R11
	NEGQ   R11
	ADDQ   SI, R11
	LEAQ   1(R10), AX
	MOVQ   R8, CX
	SUBQ   AX, CX
	SHRQ   $1, CX              // pairs of entries
	JZ     rtail

rpair:
	MOVUPD (DI)(AX*8), X0
	MULPD  X6, X0              // qᵢqⱼ
	MULPD  X5, X0              // ·inv
	MOVUPD (R11)(AX*8), X1
	SUBPD  X0, X1
	MOVUPD X1, (R11)(AX*8)
	ADDQ   $2, AX
	DECQ   CX
	JNZ    rpair

rtail:
	CMPQ  AX, R8
	JGE   rnext
	MOVSD (DI)(AX*8), X0
	MULSD X6, X0
	MULSD X5, X0
	MOVSD (R11)(AX*8), X1
	SUBSD X0, X1
	MOVSD X1, (R11)(AX*8)

rnext:
	MOVQ R8, CX
	SUBQ R10, CX
	LEAQ (SI)(CX*8), SI
	INCQ R10
	JMP  rrow

rend:
	RET
