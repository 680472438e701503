// The PrecisionBatching CPU kernels a test can run on this machine, and a scope that puts the
// process-wide kernel choice back when a test ends (tests/quant/test_pbatch*.cpp).
//   for (cpu::PbKernel k : supported_kernels()) { KernelScope scope; cpu::set_pb_kernel(k); ... }
#pragma once

#include <vector>

#include "quant/cpu/pbatch.h"

namespace octet::quant::testing {

inline std::vector<cpu::PbKernel> supported_kernels() {
  std::vector<cpu::PbKernel> ks;
  for (cpu::PbKernel k : {cpu::PbKernel::portable, cpu::PbKernel::avx2, cpu::PbKernel::avx512_vpopcnt})
    if (cpu::pb_kernel_supported(k)) ks.push_back(k);
  return ks;
}

struct KernelScope {
  cpu::PbKernel saved = cpu::pb_kernel();
  ~KernelScope() { cpu::set_pb_kernel(saved); }
};

}  // namespace octet::quant::testing
