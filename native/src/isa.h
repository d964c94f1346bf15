/* isa.h - which vector instruction set the engine's hand-vectorised loops use (axpy_rows.c,
 * kda.c's state passes): each has one variant per level, written with GCC's vector
 * extension in that level's register width, and all variants give the same bits. The
 * matrix kernels pick their own set (kernels.h); the level here follows the same
 * K3_KERNELS override, so one variable puts a process on one path. */
#ifndef K3_ISA_H
#define K3_ISA_H

typedef enum { ISA_BASE, ISA_AVX2, ISA_AVX512 } isa_level;

/* What a variant of each level may be compiled with: the instructions isa_supported checks
 * for. ISA_X86 is defined where the AVX2 and AVX-512 variants exist at all (GCC on x86-64);
 * elsewhere only the baseline is built. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ISA_X86 1
#define ISA_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define ISA_TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif
#define ISA_TARGET_BASE

/* Whether this CPU (and its OS) runs level. */
int isa_supported(isa_level level);

/* The widest level this CPU runs, or the one K3_KERNELS names (scalar: ISA_BASE, avx2:
 * ISA_AVX2, avx512 or amx: ISA_AVX512) where the CPU has it, else the next narrower;
 * found once per process. */
isa_level isa_best(void);

/* Tests only: makes isa_best() return level (which must be supported) until called again
 * with -1. */
void isa_force(int level);

#endif
