#include "core/cpu/isa.h"

#include <oneapi/dnnl/dnnl.h>

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

bool bf16_native_supported() {
  // oneDNN's own reading of the CPU: its bf16 kernels are native from avx512_core_bf16 up (AMX
  // includes it); below that it emulates them slowly, or has none.
  static const bool native = [] {
    const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    const unsigned bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
    return (isa & bf16) == bf16;
  }();
  return native;
}

Selector<Bf16Path>& bf16_selector() {
  static Selector<Bf16Path> selector{"bf16 path",
                                     "OCTET_BF16",
                                     {{Bf16Path::native, "native"}, {Bf16Path::emulated, "emulated"}},
                                     [](Bf16Path p) { return p == Bf16Path::emulated || bf16_native_supported(); },
                                     [] { return bf16_native_supported() ? Bf16Path::native : Bf16Path::emulated; }};
  return selector;
}

}  // namespace octet::cpu
