#include "layers/dropout.h"

#include "core/ops/dropout.h"

namespace octet {

Dropout::Dropout(double p) : p_(p) { OCTET_CHECK(p >= 0.0 && p <= 1.0, "Dropout: expected p in [0, 1], got ", p); }

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training()); }

std::string Dropout::extra_repr() const { return detail::str_cat("p=", p_); }

}  // namespace octet
