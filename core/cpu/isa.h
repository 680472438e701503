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

#include "core/selector.h"

namespace octet::cpu {

enum class Isa : uint8_t { portable, avx2, avx512 };

std::string_view isa_name(Isa isa);
// Compiled into this build and supported by this CPU (portable always is).
bool isa_supported(Isa isa);
Isa best_isa();
// The ISA the dispatching loops use (core/selector.h): best_isa() unless set or named by OCTET_ISA;
// process-wide. set_active_isa throws octet::Error for an unsupported ISA.
Selector<Isa>& isa_selector();
Isa active_isa();
void set_active_isa(Isa isa);

// How autocast's bf16 ops run on the CPU (core/autocast.h): native (oneDNN's bf16 kernels, on
// CPUs with AVX512-BF16 or AMX, the default there) or emulated (the inputs rounded to bf16, then
// the f32 kernels: the same numbers up to summation order; the only path on AVX2-only CPUs).
// OCTET_BF16=native|emulated.
enum class Bf16Path : uint8_t { native, emulated };
bool bf16_native_supported();
Selector<Bf16Path>& bf16_selector();

}  // namespace octet::cpu

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OCTET_CPU_X86 1
// A function compiled for AVX2 / AVX-512F; call it only when isa_supported says yes. Calls it
// makes to baseline inline functions may be inlined into it (flatten forces that), so a generic
// loop body compiles into wider vectors.
// AVX-512 means F + BW + DQ + VL (x86-64-v4): byte and word lanes in zmm registers for the int8
// loops; isa_supported(Isa::avx512) checks all four.
#define OCTET_TARGET_AVX2 __attribute__((target("avx2")))
#define OCTET_TARGET_AVX512 __attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl")))
#endif

// simd_dispatch(fn): fn() compiled for the active ISA, for loops whose plain C++ the compiler
// vectorizes (the INT8 kernels): one copy of fn per ISA, each a flatten function with that ISA's
// target, so fn's body and everything it calls inline (OCTET_SIMD_INLINE helpers included) are
// compiled with its vectors. fn is a lambda capturing by value: the copy the per-ISA function
// works on is its own, so stores through the kernel's pointers cannot alias the captured values
// and the loops vectorize. set_active_isa picks the copy, so a test runs every path.
//   void nearest_run(const float* x, int64_t n, int8_t* q) {
//     cpu::simd_dispatch([=] { for (int64_t i = 0; i < n; ++i) q[i] = code(x[i]); });
//   }
#if defined(__GNUC__)
#define OCTET_SIMD_INLINE inline __attribute__((always_inline))
#else
#define OCTET_SIMD_INLINE inline
#endif

namespace octet::cpu {

#ifdef OCTET_CPU_X86
template <typename Fn>
[[gnu::flatten]] OCTET_TARGET_AVX512 auto simd_avx512(Fn fn) {
  return fn();
}
template <typename Fn>
[[gnu::flatten]] OCTET_TARGET_AVX2 auto simd_avx2(Fn fn) {
  return fn();
}
#endif
template <typename Fn>
[[gnu::flatten]] auto simd_portable(Fn fn) {
  return fn();
}

template <typename Fn>
auto simd_dispatch(Fn fn) {
#ifdef OCTET_CPU_X86
  switch (active_isa()) {
    case Isa::avx512:
      return simd_avx512(fn);
    case Isa::avx2:
      return simd_avx2(fn);
    default:
      break;
  }
#endif
  return simd_portable(fn);
}

}  // namespace octet::cpu
