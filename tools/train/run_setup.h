// What a run trains, built from its recipe before anything is written: the device, the task (its
// data), the model and its INT8 layers, the optimizer and its schedule, and the loop's settings; for
// a resumed run, restored from its checkpoint. The training loop's set-up part (trainer.cpp), with
// the start of the run's log.
//   RunSetup setup(recipe, opts.model, resuming ? &resume.checkpoint : nullptr, agree.group());
//   if (resuming) setup.restore(resume.checkpoint, state);
//   log_run_start(setup, folder.dir(), resuming ? resume.path : "", state.step, agree.world_size());
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <string>

#include "core/distributed.h"
#include "layers/fusion.h"
#include "layers/module.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tools/train/checkpoint.h"
#include "tools/train/int8_run.h"
#include "tools/train/metrics.h"
#include "tools/train/recipe.h"
#include "tools/train/task.h"
#include "tools/train/torch_weights.h"

namespace octet::train {

struct RunSetup {
  // `given`: a model of the caller's instead of the recipe's model.* (TrainOptions::model), or null;
  // `resume`: the checkpoint a resumed run continues (its data position, its vocabulary), or null;
  // `group`: the processes of a data-parallel run (each the GPU of its rank), or null. The data
  // (and a language model's vocabulary, which sizes the model) come first; the model is initialized
  // on the CPU (the same weights for every device), then moved, before the optimizer creates its
  // state next to the parameters.
  RunSetup(const Recipe& recipe, std::shared_ptr<Module> given, const Checkpoint* resume, dist::ProcessGroup* group);

  // The model, optimizer, RNG, schedule, task and INT8 layers continue where `ckpt` was (loading
  // copies host tensors into device ones); `ckpt` is emptied: its tensors now live in them.
  void restore(Checkpoint& ckpt, const TrainState& state);

  // model.name, or the type of the caller's model.
  std::string model_name() const;
  // What the run's page says of it (metrics.h); `world` processes (1: alone).
  RunFacts facts(int world) const;

  const Recipe& recipe;
  bool given_model = false;
  dist::ProcessGroup* group = nullptr;  // the data-parallel run's processes, or null
  Device device = Device::cpu();
  std::unique_ptr<Task> task;
  bool lm = false;  // a language model (the task has a vocabulary)
  std::shared_ptr<Module> model;
  std::optional<InitFromReport> init_report;  // model.init_from's, for the log
  Int8Run int8{{}};
  FusionReport fusion;              // what fuse() set up, for the log
  DType precision = DType::f32;     // train.precision: f32, or bf16 (autocast)
  bool dropped_int8_stats = false;  // the checkpoint has INT8 layers' state this run does not use
  std::unique_ptr<Optimizer> optimizer;
  std::shared_ptr<PlateauSchedule> plateau;
  std::shared_ptr<LrSchedule> schedule;
  int64_t epochs = 0, batches = 0, log_every = 1, max_steps = 0;
  // The CPU reads loss and accuracy every step; a GPU keeps them until the next metric record.
  bool read_every_step = true;
};

// The start of a run's log: what it trains, where, from what (`resumed_from`: the checkpoint a
// resumed run continues at `step`, "" for a new run), on `world` processes; its INT8 layers,
// model.init_from's report and the optimizer's state.
void log_run_start(const RunSetup& setup, const std::string& dir, const std::string& resumed_from, int64_t step,
                   int world);

}  // namespace octet::train
