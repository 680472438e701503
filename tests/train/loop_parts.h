// Helpers of the tests of the training loop's parts (tools/train/train_step.h, evaluator.h, ...):
// a recipe that needs no data, and a task of one fixed batch through a small Linear model.
//   auto model = std::make_shared<Linear>(4, 3);  FixedBatchTask task;  task.poison = true;
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "core/octet.h"
#include "tools/train/recipe.h"
#include "tools/train/task.h"

namespace octet::train {

// The defaults but for where the runs go and what the optimizer does.
inline Recipe parts_recipe(const std::string& runs, std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"checkpoint.dir=" + runs, "log.progress=false",   "optimizer.name=sgd",
                                "optimizer.lr=0.1",       "optimizer.momentum=0", "optimizer.weight_decay=0",
                                "schedule.name=constant"};
  o.insert(o.end(), extra.begin(), extra.end());
  return parse_recipe("", "parts.yaml", o);
}

// One batch of 8 examples with 4 features and labels 0..2; `poison` makes its inputs NaN.
class FixedBatchTask : public Task {
 public:
  std::string describe() const override { return "8 fixed examples"; }
  int64_t batches_per_epoch() const override { return 1; }
  double units_per_step() const override { return 8; }
  const char* unit() const override { return "samples"; }
  void start_epoch(Module&, int64_t, int64_t) override {}
  StepOutput step(Module& model, int64_t) override {
    Tensor x = arange(32, TensorOptions(DType::f32)).reshape({8, 4}) * 0.1;
    if (poison) x = x * std::numeric_limits<double>::quiet_NaN();
    Tensor labels = from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1}, {8});
    Tensor logits = model.forward(x);
    return {cross_entropy(logits, labels), logits, labels};
  }
  void skip_step() override { ++skips; }
  EvalResult evaluate_epoch(Module&) override { return eval; }
  std::vector<EvalResult> evaluate_all(Module&) override { return {eval}; }
  bool improves(const EvalResult&, TrainState&) const override { return true; }
  Tensor example_input() const override { return zeros({1, 4}); }

  bool poison = false;
  int skips = 0;
  EvalResult eval{0.5, 75.0, 100.0, 8, "test", false};
};

}  // namespace octet::train
