// PLACEHOLDER (to be replaced by the real kernels before this lands).
#include "core/cuda/kernels.h"

namespace octet::cuda {

void batch_norm_forward(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&,
                        const Tensor&, const Tensor&) { OCTET_FAIL("cuda::batch_norm_forward: not implemented yet"); }

void batch_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&, const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::batch_norm_backward: not implemented yet"); }

}  // namespace octet::cuda
