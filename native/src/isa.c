/* isa.c - the instruction-set level of the hand-vectorised loops (see isa.h). */
#include "isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int isa_supported(isa_level level) {
#ifdef ISA_X86
    if (level == ISA_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (level == ISA_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return level == ISA_BASE;
}

static _Atomic int best = -1, forced = -1;

isa_level isa_best(void) {
    const int f = forced;
    if (f >= 0)
        return (isa_level)f;
    int b = best;
    if (b < 0) {
        const char *force = getenv("K3_KERNELS");
        b = ISA_AVX512;
        if (force && strcmp(force, "scalar") == 0)
            b = ISA_BASE;
        else if (force && strcmp(force, "avx2") == 0)
            b = ISA_AVX2;
        while (b > ISA_BASE && !isa_supported((isa_level)b))
            b--;
        best = b;
    }
    return (isa_level)b;
}

void isa_force(int level) {
    forced = level;
}
