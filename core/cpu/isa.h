// The CPU instruction set of the hand-vectorized and per-ISA-compiled loops. The library is built
// for baseline x86-64; loops that gain from wider vectors (block-wise quantization, the optimizer
// updates) are also compiled per function for AVX2 and AVX-512 (OCTET_TARGET_AVX2 /
// OCTET_TARGET_AVX512, GCC/Clang target attributes) and picked at run time from the CPU's
// features. Every path gives bit-identical results: the per-ISA copies of a loop run the same
// IEEE operations (no FMA contraction: the library is compiled with -ffp-contract=off), and the
// hand-written kernels are tested against the plain path.
//   cpu::set_active_isa(cpu::Isa::portable);   // e.g. to test or time the fallback
//   if (cpu::active_isa() == cpu::Isa::avx512) ...
#pragma once

#include <cstdint>
#include <string_view>

namespace octet::cpu {

enum class Isa : uint8_t { portable, avx2, avx512 };

std::string_view isa_name(Isa isa);
// Compiled into this build and supported by this CPU (portable always is).
bool isa_supported(Isa isa);
Isa best_isa();
// The ISA the dispatching loops use: best_isa() unless set; process-wide. set_active_isa throws
// octet::Error for an unsupported ISA.
Isa active_isa();
void set_active_isa(Isa isa);

}  // namespace octet::cpu

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OCTET_CPU_X86 1
// A function compiled for AVX2 / AVX-512F; call it only when isa_supported says yes. Calls it
// makes to baseline inline functions may be inlined into it (flatten forces that), so a generic
// loop body compiles into wider vectors.
#define OCTET_TARGET_AVX2 __attribute__((target("avx2")))
#define OCTET_TARGET_AVX512 __attribute__((target("avx512f")))
#endif

// OCTET_SIMD_CLONES: the other way to the same end, for loops that need no explicit dispatch (the
// INT8 kernels): GCC compiles the function for AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and baseline
// x86-64 and the loader picks the version for this CPU (target_clones, an ifunc). It ignores
// set_active_isa, so a test sees only the version this CPU runs, against the plain path.
// The helpers a cloned kernel calls are OCTET_SIMD_INLINE: inlined, they are compiled (and
// vectorized) for the clone's ISA; left as calls they would run the baseline version.
//   OCTET_SIMD_CLONES void scale_run(const int32_t* acc, int64_t n, float s, float* out);
//   OCTET_SIMD_INLINE float clamp127(float y);   // called from a cloned kernel
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define OCTET_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define OCTET_SIMD_CLONES
#endif
#if defined(__GNUC__)
#define OCTET_SIMD_INLINE inline __attribute__((always_inline))
#else
#define OCTET_SIMD_INLINE inline
#endif
