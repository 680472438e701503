// PLACEHOLDER (to be replaced by the real kernels before this lands).
#include "core/cuda/kernels.h"

namespace octet::cuda {

void reduce_rows(ReduceOp, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::reduce_rows: not implemented yet"); }

void arg_reduce_rows(bool, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::arg_reduce_rows: not implemented yet"); }

void softmax_rows(bool, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::softmax_rows: not implemented yet"); }

}  // namespace octet::cuda
