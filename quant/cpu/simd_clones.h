// OCTET_SIMD_CLONES compiles a loop for AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and baseline x86-64
// and lets the loader pick the version for this CPU (GCC target_clones, an ifunc): the library is
// built for baseline x86-64, and the hot loops of INT8 training get wide vectors without a
// hand-written dispatch. The versions must compute the same bits, so the files using it are
// compiled with -ffp-contract=off (CMakeLists.txt): the v3/v4 clones have FMA and would otherwise
// fuse a multiply and an add into one rounding.
//   OCTET_SIMD_CLONES void scale_run(const int32_t* acc, int64_t n, float s, float* out);
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define OCTET_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define OCTET_SIMD_CLONES
#endif
