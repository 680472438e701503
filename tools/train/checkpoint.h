// Training checkpoints: one safetensors file holding the model (tensors "model.<name>"), the
// optimizer state ("optimizer.<name>"), the INT8 layers' stats of an INT8 run ("int8.<layer>.<stat>",
// tools/train/int8_run.h), the task's own state (tensors and metadata "task.<name>": a language model's
// vocabulary and hidden state, tools/train/task.h), and in __metadata__ its format and format
// version, the training position, the RNG state, the plateau schedule's state and the resolved
// recipe, so a run resumes exactly and `octet eval` can rebuild the model. An export (`octet export`,
// tools/cli/quant_run.h) adds the preprocessed weights of its quantized layers ("quant.<layer>.<matrix>.<part>") and
// their assignment (metadata "quant.assignment", quant/precision.h), so evaluation skips preprocessing.
//   save_checkpoint("runs/x/last.safetensors", model->state_dict(), opt.state_dict(), state, yaml);
//   Checkpoint c = load_checkpoint("runs/x/last.safetensors");
#pragma once

#include <string>

#include <cmath>

#include "core/serialization.h"
#include "core/tensor.h"
#include "optim/schedule.h"

namespace octet::train {

// Sums over the training steps of an epoch so far: its train loss and accuracy (the epoch summary
// and the per-epoch record of metrics.jsonl), kept in checkpoints so a run resumed mid-epoch reports
// the same epoch average as one never stopped. `skipped`: the examples of skipped steps.
struct EpochSums {
  double loss = 0;  // sum of the steps' mean loss x examples (tokens)
  int64_t n = 0, correct = 0, skipped = 0;
};

struct TrainState {
  int64_t epoch = 0;  // epoch to continue in
  int64_t batch = 0;  // next batch of that epoch
  int64_t step = 0;   // optimizer steps taken
  double best_top1 = -1.0;
  double best_loss = HUGE_VAL;            // best evaluation loss (language models keep that checkpoint)
  uint64_t rng_seed = 0, rng_offset = 0;  // the default generator (dropout)
  PlateauSchedule::State plateau;         // schedule.name: plateau
  EpochSums epoch_sums;                   // of the epoch in progress
};

struct Checkpoint {
  NamedTensors model;
  NamedTensors optimizer;
  NamedTensors int8;             // empty unless the run trains INT8 layers
  NamedTensors task;             // "task.*" tensors, without the prefix
  Metadata task_metadata;        // "task.*" metadata, without the prefix
  NamedTensors quant;            // "quant.*" tensors of an export, without the prefix
  std::string quant_assignment;  // metadata "quant.assignment" ("" unless an export)
  TrainState state;
  std::string recipe_yaml;
  std::string path;
};

// Metadata "format" says that a file is an octet checkpoint, "format_version" which layout of
// tensors and metadata it has. A change that this reader would misread gets a new version: octet
// reads its own version only, and a checkpoint of another version, or of none, is an Error.
constexpr const char* kCheckpointFormat = "octet-checkpoint";
constexpr const char* kCheckpointFormatVersion = "1";

// Written atomically (temporary file + rename): an existing checkpoint is replaced whole or not at all.
void save_checkpoint(const std::string& path, const NamedTensors& model, const NamedTensors& optimizer,
                     const TrainState& state, const std::string& recipe_yaml, const NamedTensors& int8 = {},
                     const NamedTensors& task = {}, const Metadata& task_metadata = {}, const NamedTensors& quant = {},
                     const std::string& quant_assignment = "");
// Rejects files that are not octet checkpoints, of another format version, or whose metadata is
// missing or malformed, with an octet::Error naming the file and the problem.
Checkpoint load_checkpoint(const std::string& path);
// The same, from a file already read (its path names it in errors).
Checkpoint checkpoint_of(const SafetensorsFile& f);
// The checkpoint file a path names for evaluation or inspection: the path itself, or for a run
// folder its best checkpoint (its last one before any epoch finished).
std::string checkpoint_path(const std::string& run_or_checkpoint);

}  // namespace octet::train
