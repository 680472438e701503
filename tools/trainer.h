// The training loop behind `octet train` and the evaluation behind `octet eval`.
// A run folder holds recipe.yaml (the resolved recipe), train.log, metrics.jsonl, curves.html,
// last.safetensors / best.safetensors and, if asked, tensorboard/. A run continues exactly from
// last.safetensors (`resume`): same batches, same dropout masks, same losses on the CPU.
// train.device picks the CPU or a GPU (cuda, cuda:N): the model and batches live there, batches
// are copied ahead of the step that needs them, and metrics.jsonl adds the GPU's memory counters.
// With quant.int8_conv the model's convolutions train in INT8 (tools/int8_run.h: DCLR before each
// optimizer step, per-layer telemetry, the layers' stats in checkpoints); `octet eval` evaluates
// such a checkpoint through its INT8 layers.
//   TrainResult r = train(load_recipe("recipes/fashion_mnist.yaml"), {});
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "layers/module.h"
#include "tools/recipe.h"

namespace octet::tools {

struct TrainOptions {
  std::string resume;                       // a checkpoint file or run folder to continue ("" = new run)
  std::vector<std::string> overrides;       // applied on top of a resumed run's recipe
  const std::atomic<bool>* stop = nullptr;  // set by SIGINT/SIGTERM: save and return at the next step
};

struct EvalResult {
  double loss = 0, top1 = 0, top5 = 0;  // mean loss, accuracies in %
  int64_t examples = 0;
};

struct TrainResult {
  std::string run_dir;
  EvalResult last_eval;
  int64_t steps = 0;
  bool stopped = false;  // by a signal or train.max_steps, with a checkpoint written
};

TrainResult train(const Recipe& recipe, const TrainOptions& opts);

// Runs on the device the model's parameters are on (batches are moved there).
EvalResult evaluate(Module& model, const std::shared_ptr<Dataset>& data, int64_t batch_size, int64_t workers);

// Evaluates a checkpoint (or a run folder's best.safetensors) on its recipe's test split (or
// `data_root`): `octet eval`. Training keeps <checkpoint.dir>/latest pointing at the newest run.
// `device` is "cpu", "cuda" or "cuda:N" (an octet::Error when not usable here); empty means the
// recipe's train.device when this machine can use it, else the CPU.
EvalResult evaluate_checkpoint(const std::string& path, const std::string& data_root, int64_t threads,
                               const std::string& device = "");

}  // namespace octet::tools
