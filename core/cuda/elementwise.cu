// PLACEHOLDER (to be replaced by the real kernels before this lands).
#include "core/cuda/kernels.h"

namespace octet::cuda {

void copy(const Tensor&, const Tensor&) { OCTET_FAIL("cuda::copy: not implemented yet"); }

void fill(const Tensor&, double) { OCTET_FAIL("cuda::fill: not implemented yet"); }

void uniform(const Tensor&, double, double, uint64_t, uint64_t) { OCTET_FAIL("cuda::uniform: not implemented yet"); }

void normal(const Tensor&, double, double, uint64_t, uint64_t) { OCTET_FAIL("cuda::normal: not implemented yet"); }

void unary(UnaryOp, const Tensor&, const Tensor&, double, double) { OCTET_FAIL("cuda::unary: not implemented yet"); }

void binary(BinaryOp, const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::binary: not implemented yet"); }

void compare(CompareOp, const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::compare: not implemented yet"); }

void where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::where: not implemented yet"); }

}  // namespace octet::cuda
