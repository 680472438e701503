#include "models/mlp.h"

#include "core/ops/elementwise.h"
#include "core/ops/nn.h"

namespace octet {

Mlp::Mlp(int64_t in_features, std::vector<int64_t> hidden_sizes, int64_t num_classes, double dropout)
    : in_features_(in_features), hidden_sizes_(std::move(hidden_sizes)), dropout_(dropout) {
  OCTET_CHECK(in_features > 0 && num_classes > 0, "Mlp: expected positive in_features and num_classes, got ",
              in_features, " and ", num_classes);
  OCTET_CHECK(dropout >= 0 && dropout < 1, "Mlp: dropout must be in [0, 1), got ", dropout);
  int64_t in = in_features;
  for (size_t i = 0; i <= hidden_sizes_.size(); ++i) {
    const int64_t out = i < hidden_sizes_.size() ? hidden_sizes_[i] : num_classes;
    OCTET_CHECK(out > 0, "Mlp: hidden sizes must be positive, got ", out, " at index ", i);
    fc_.push_back(register_module("fc" + std::to_string(i), std::make_shared<Linear>(in, out)));
    in = out;
  }
}

Tensor Mlp::forward(const Tensor& x) {
  OCTET_CHECK(x.defined() && x.dim() >= 1 && x.numel() == x.size(0) * in_features_, "Mlp: expected input [N, ",
              in_features_, "] (or [N, ...] of as many elements per example), got ", x.defined() ? x.shape() : Shape{});
  Tensor h = x.reshape({x.size(0), in_features_});
  for (size_t i = 0; i < fc_.size(); ++i) {
    h = (*fc_[i])(h);
    if (i + 1 == fc_.size()) break;
    h = relu(h);
    if (dropout_ > 0) h = dropout(h, dropout_, is_training());
  }
  return h;
}

std::string Mlp::extra_repr() const {
  std::string sizes;
  for (int64_t s : hidden_sizes_) sizes += (sizes.empty() ? "" : ", ") + std::to_string(s);
  return detail::str_cat("in_features=", in_features_, ", hidden_sizes=[", sizes, "], dropout=", dropout_);
}

}  // namespace octet
