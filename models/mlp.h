// Mlp: a fully connected classifier, the PrecisionBatching paper's MNIST network (three Linear
// layers, hidden 4096 x 2, ReLU): flatten, then per hidden size Linear + ReLU (+ Dropout when
// dropout > 0), then Linear num_classes. Its children are fc0, fc1, ... (fc<last> the output layer),
// so a precision plan names them directly (`fc0: {w: 4, a: 8}`).
//   auto net = std::make_shared<Mlp>(28 * 28, std::vector<int64_t>{4096, 4096}, 10);
//   Tensor logits = (*net)(x);   // x [N, 1, 28, 28] or [N, 784] -> [N, 10]
#pragma once

#include <vector>

#include "layers/linear.h"

namespace octet {

class Mlp : public Module {
 public:
  // in_features: the elements of one example (channels x height x width); hidden_sizes may be empty
  // (a linear classifier). Layers keep PyTorch's default initialization.
  Mlp(int64_t in_features, std::vector<int64_t> hidden_sizes, int64_t num_classes, double dropout = 0.0);
  // x [N, ...] with in_features elements per example -> [N, num_classes]
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Mlp"; }
  std::string extra_repr() const override;

  int64_t in_features_;
  std::vector<int64_t> hidden_sizes_;
  double dropout_;
  std::vector<std::shared_ptr<Linear>> fc_;  // hidden layers, then the output layer
};

}  // namespace octet
