// What run_sweep and run_search share (tools/cli/sweep.h): the checkpoint opened for a sweep, the
// plans they convert with, the baselines' weight rounding and the batch-1 latency.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/cli/sweep.h"
#include "tools/train/trainer.h"

namespace octet::cli::detail {

struct SweepModel {
  train::CheckpointModel m;
  std::unique_ptr<train::Task> task;
  Tensor example;
  bool lm = false;
  std::vector<std::string> layers;  // the layers a sweep converts, in named_modules() order
};
// The checkpoint with its task (data.limit_test = opts.limit when given).
SweepModel open_sweep_model(const std::string& path, const SweepOptions& opts, const std::string& command);

// `spec` for every layer of m.layers, the others float.
quant::PrecisionPlan plan_for(const SweepModel& m, const quant::LayerPrecision& spec);

// Rounds the weights of m.layers to IEEE half precision in place; restore() puts the originals back.
class HalfWeights {
 public:
  explicit HalfWeights(const SweepModel& m);
  ~HalfWeights() { restore(); }
  void restore();

 private:
  std::vector<std::pair<Tensor, Tensor>> saved_;  // (parameter, its original values)
};
// x rounded to the nearest IEEE binary16 value (ties to even), as a float: overflow to +-inf.
float round_to_half(float x);

// Median over opts.repeats blocks of the mean time of one batch-1 forward (a language model: one
// token, the state carried), after a warm-up block.
double batch1_latency(Module& model, const Tensor& example, Device device, const SweepOptions& o);

// Evaluates the model as it is now: the split `evaluate_all` reports last (and its first in *first).
train::EvalResult evaluate(SweepModel& m, train::EvalResult* first = nullptr);

// "top-1 (%)" or "perplexity"
inline std::string quality_name(bool lm) { return lm ? "perplexity" : "top-1 (%)"; }

}  // namespace octet::cli::detail
