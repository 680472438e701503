// PLACEHOLDER (to be replaced by the real kernels before this lands).
#include "core/cuda/kernels.h"

namespace octet::cuda {

void gather_rows(const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::gather_rows: not implemented yet"); }

void scatter_add_rows(const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::scatter_add_rows: not implemented yet"); }

void index_select_rows(const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::index_select_rows: not implemented yet"); }

void index_add_rows(const Tensor&, const Tensor&, const Tensor&) { OCTET_FAIL("cuda::index_add_rows: not implemented yet"); }

}  // namespace octet::cuda
