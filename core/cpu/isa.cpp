#include "core/cpu/isa.h"

#include "core/error.h"

namespace octet::cpu {

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

Selector<Isa>& isa_selector() {
  static Selector<Isa> selector{"cpu ISA",
                                "OCTET_ISA",
                                {{Isa::portable, "portable"}, {Isa::avx2, "avx2"}, {Isa::avx512, "avx512"}},
                                isa_supported,
                                best_isa};
  return selector;
}

std::string_view isa_name(Isa isa) { return isa_selector().name(isa); }
Isa active_isa() { return isa_selector().active(); }
void set_active_isa(Isa isa) { isa_selector().set(isa); }

}  // namespace octet::cpu
