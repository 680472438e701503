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
