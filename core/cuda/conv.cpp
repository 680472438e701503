// PLACEHOLDER (to be replaced by the real kernels before this lands).
#include "core/cuda/kernels.h"

namespace octet::cuda {

void conv2d_forward(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::conv2d_forward: not implemented yet"); }

void conv2d_backward(const Conv2dGeometry&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                     const Tensor&) { OCTET_FAIL("cuda::conv2d_backward: not implemented yet"); }

}  // namespace octet::cuda
