#include "layers/shape.h"

namespace octet {

Tensor Flatten::forward(const Tensor& x) {
  OCTET_CHECK(x.defined(), "Flatten: input is undefined");
  return x.flatten(start_dim_, end_dim_);
}

std::string Flatten::extra_repr() const { return detail::str_cat("start_dim=", start_dim_, ", end_dim=", end_dim_); }

}  // namespace octet
