// The training loop behind `octet train` and the evaluation behind `octet eval`, for every task
// (tools/train/task.h: image classification, and language models trained with truncated BPTT).
// A run folder holds recipe.yaml (the resolved recipe), train.log, metrics.jsonl, curves.html,
// last.safetensors / best.safetensors and, if asked, tensorboard/. A run continues exactly from
// last.safetensors (`resume`): same batches, same dropout masks, same losses on the CPU.
// train.device picks the CPU or a GPU (cuda, cuda:N): the model and batches live there, batches
// are copied ahead of the step that needs them, and metrics.jsonl adds the GPU's memory counters.
// With quant.int8_conv (quant.int8_linear) the model's convolutions (Linear layers) train in INT8
// (tools/train/int8_run.h: DCLR before each optimizer step, per-layer telemetry, the layers' stats
// in checkpoints); `octet eval` evaluates
// such a checkpoint through its INT8 layers, and an export (`octet export`, tools/cli/quant_run.h)
// through its quantized inference layers. A language model's run logs perplexity, keeps the
// checkpoint of the best validation loss as best.safetensors, and evaluates it on the test split
// at the end.
//   TrainResult r = train(load_recipe("recipes/fashion_mnist.yaml"), {});
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "quant/precision.h"
#include "tools/train/checkpoint.h"
#include "tools/train/recipe.h"
#include "tools/train/task.h"

namespace octet::train {

struct TrainOptions {
  std::string resume;                             // a checkpoint file or run folder to continue ("" = new run)
  std::vector<std::string> overrides;             // applied on top of a resumed run's recipe
  const std::atomic<bool>* stop = nullptr;        // set by SIGINT/SIGTERM: save and return at the next step
  const std::atomic<int>* stop_signal = nullptr;  // the signal that set `stop` (for the log, TrainResult)
  // A model of the caller's instead of the recipe's model.* (on the CPU, freshly initialized; the
  // trainer moves it to train.device). It must take the task's batches: images [N,C,H,W] -> logits
  // [N,classes], or an LstmLm for a language model. A resumed run needs the same model again.
  std::shared_ptr<Module> model;
  // Launched as several processes (mpirun, srun): false trains this process alone, as if started
  // without a launcher (each rank its own run; rank 0's folder only if the others write elsewhere).
  bool distributed = true;
};

struct TrainResult {
  std::string run_dir;
  EvalResult last_eval;   // after the last epoch: test (classification) or valid (language model)
  EvalResult final_test;  // the test split at the end: last_eval, or a language model's best checkpoint
  int64_t steps = 0;
  bool stopped = false;  // by a signal or train.max_steps, with a checkpoint written
  // The signal that stopped the run on any rank (every rank of a job gets it, so every process exits
  // with the same status); 0 when none did.
  int stop_signal = 0;
};

TrainResult train(const Recipe& recipe, const TrainOptions& opts);

// Evaluates a checkpoint (or a run folder's best.safetensors) on its recipe's test split (or
// `data_root`): `octet eval`. Training keeps <checkpoint.dir>/latest pointing at the newest run.
// `device` is "cpu", "cuda" or "cuda:N" (an octet::Error when not usable here); empty means the
// recipe's train.device when this machine can use it, else the CPU.
EvalResult evaluate_checkpoint(const std::string& path, const std::string& data_root, int64_t threads,
                               const std::string& device = "");
// A checkpoint (or a run folder's best.safetensors) with its recipe and its model, rebuilt,
// loaded and moved to `device` ("cpu", "cuda" or "cuda:N": an octet::Error naming `command`'s
// --device when not usable here; empty: the recipe's train.device when this machine can use it, else the CPU), in
// evaluation and generation.
struct CheckpointModel {
  std::string path;  // the file
  Checkpoint checkpoint;
  Recipe recipe;
  std::shared_ptr<Module> model;
  Device device = Device::cpu();
  // An export's quantized layers (tools/cli/quant_run.h), converted from its stored data; else empty.
  std::vector<quant::ConvertedLayer> quant_layers;
};
// An export holds no float weights for its quantized layers, so `command` "export" or "sweep..."
// (which quantize the float model) refuse one, saying to use the checkpoint it came from.
// `overrides` ("section.key=value") change the stored recipe, except the keys that shape the
// weights (model.* but model.dropout, quant.int8_conv, quant.int8_linear and quant.keep_first_last_float): a
// UsageError.
CheckpointModel open_checkpoint_model(const std::string& path, int64_t threads, const std::string& device = "",
                                      const std::string& command = "eval",
                                      const std::vector<std::string>& overrides = {});
// The float weight matrices of `model`'s quantized layers (Linear::set_inference, LSTM::set_inference),
// as state_dict names ("decoder.weight", "lstm.weight_ih_l0", ...): an export leaves them out, as
// the layers compute with their stored quantized data (their biases stay).
std::vector<std::string> quantized_float_weights(const Module& model);

// Every split `octet eval` reports: test; for a language model valid, then test.
std::vector<EvalResult> evaluate_checkpoint_splits(const std::string& path, const std::string& data_root,
                                                   int64_t threads, const std::string& device = "",
                                                   const std::vector<std::string>& overrides = {});

}  // namespace octet::train
