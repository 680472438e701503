#include "core/cpu/isa.h"

#include <atomic>

#include "core/error.h"

namespace octet::cpu {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::portable:
      return "portable";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::portable:
      return true;
#ifdef OCTET_CPU_X86
    case Isa::avx2:
      return __builtin_cpu_supports("avx2");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#endif
    default:
      return false;
  }
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::avx512) ? Isa::avx512
                          : isa_supported(Isa::avx2) ? Isa::avx2
                                                     : Isa::portable;
  return best;
}

namespace {
std::atomic<int> g_active_isa{-1};  // -1: best_isa()
}  // namespace

Isa active_isa() {
  const int a = g_active_isa.load(std::memory_order_relaxed);
  return a < 0 ? best_isa() : static_cast<Isa>(a);
}

void set_active_isa(Isa isa) {
  OCTET_CHECK(isa_supported(isa), "cpu::set_active_isa: ISA ", isa_name(isa),
              " is not supported by this CPU or build (best: ", isa_name(best_isa()), ")");
  g_active_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

}  // namespace octet::cpu
