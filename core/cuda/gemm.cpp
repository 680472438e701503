// PLACEHOLDER (to be replaced by the real kernels before this lands).
#include "core/cuda/kernels.h"

namespace octet::cuda {

void gemm(bool, bool, int64_t, int64_t, int64_t, double, const Tensor&, int64_t,
          const Tensor&, int64_t, double, const Tensor&, int64_t) { OCTET_FAIL("cuda::gemm: not implemented yet"); }

}  // namespace octet::cuda
