// BatchNorm2d: per-channel batch normalization of NCHW inputs with running statistics.
// Training normalizes with the batch statistics and updates running_mean / running_var
// (r = (1 - momentum) r + momentum * stat, unbiased variance) and num_batches_tracked;
// evaluation normalizes with the running statistics.
//   auto bn = std::make_shared<BatchNorm2d>(64);   Tensor y = (*bn)(x);   bn->eval();
#pragma once

#include "layers/module.h"

namespace octet {

class BatchNorm2d : public Module {
 public:
  // weight 1, bias 0, running_mean 0, running_var 1, num_batches_tracked 0 (i64 scalar).
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
  // x [N, C, H, W] -> same shape
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t num_features_;
  double eps_, momentum_;
  Tensor weight_, bias_;                                     // parameters [C]
  Tensor running_mean_, running_var_, num_batches_tracked_;  // buffers
};

}  // namespace octet
