// PLACEHOLDER (to be replaced by the real kernels before this lands).
#include "core/cuda/kernels.h"

namespace octet::cuda {

void max_pool2d_forward(const Pool2dGeometry&, const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::max_pool2d_forward: not implemented yet"); }

void max_pool2d_backward(const Pool2dGeometry&, const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::max_pool2d_backward: not implemented yet"); }

void avg_pool2d_forward(const Pool2dGeometry&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::avg_pool2d_forward: not implemented yet"); }

void avg_pool2d_backward(const Pool2dGeometry&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::avg_pool2d_backward: not implemented yet"); }

void adaptive_avg_pool2d_forward(const Tensor&, const Tensor&) { OCTET_FAIL("cuda::adaptive_avg_pool2d_forward: not implemented yet"); }

void adaptive_avg_pool2d_backward(const Tensor&, const Tensor&) { OCTET_FAIL("cuda::adaptive_avg_pool2d_backward: not implemented yet"); }

}  // namespace octet::cuda
