#include "tools/train/run_setup.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/octet.h"
#include "tools/train/builders.h"
#include "tools/train/run_support.h"

namespace octet::train {

RunSetup::RunSetup(const Recipe& r, std::shared_ptr<Module> given, const Checkpoint* resume, dist::ProcessGroup* group)
    : recipe(r), given_model(given != nullptr), group(group) {
  device = usable_device(r.text("train.device"), "recipe train.device");
  // train.device: cuda under mpirun: each process the GPU of its rank on its host.
  if (group && device.is_cuda() && r.text("train.device") == "cuda")
    device = Device::cuda(group->local_rank() % std::max(1, cuda_device_count()));
  use_threads(r.integer("train.threads"), "train.threads");
  manual_seed(static_cast<uint64_t>(r.integer("train.seed")));
  epochs = r.integer("train.epochs");  // >= 1: the recipe checked it
  task = make_task(r, device, true, resume, "", group);
  lm = task->vocab_size() > 0;
  model = given ? std::move(given) : build_model_from(r, task->vocab_size());
  // model.init_from: the starting weights (a resume has its own).
  if (!resume && !r.text("model.init_from").empty())
    init_report = init_from_file(*model, r.text("model.init_from"),
                                 {r.boolean("model.init_strict"), r.text_list("model.init_ignore")});
  int8 = Int8Run(build_int8(r, *model));
  use_device(device, r.boolean("train.allow_tf32"));
  model->to(device);
  fusion = fuse_for_task(*model, *task);  // after the INT8 layers and the move: what runs
  precision = r.text("train.precision") == "bf16" ? DType::bf16 : DType::f32;
  optimizer = build_optimizer(r, model->named_parameters(), model.get());
  // train.shard_optimizer: ZeRO stage 1, before any state exists (a resume loads into the shards).
  if (group && group->size() > 1 && r.boolean("train.shard_optimizer")) optimizer->shard_state(*group);
  schedule = build_schedule(r, &plateau);
  log_every = r.integer("log.every_steps");  // >= 1: the recipe checked it
  max_steps = r.integer("train.max_steps");
  batches = task->batches_per_epoch();
  OCTET_CHECK(batches >= 1, "train: the training data makes no batch");
  read_every_step = device.is_cpu();
}

void RunSetup::restore(Checkpoint& ckpt, const TrainState& state) {
  const std::string built = given_model ? "the model given to train() (" + model->type_name() + ")"
                                        : "the model this run builds (model.name " + recipe.text("model.name") + ")";
  load_model_from(*model, ckpt.model, ckpt.path, built);
  load_from([&] { optimizer->load_state_dict(ckpt.optimizer); }, ckpt.path,
            "the optimizer this run builds (optimizer.name " + recipe.text("optimizer.name") + ")");
  default_generator().set_state(state.rng_seed, state.rng_offset);
  if (plateau) plateau->set_state(state.plateau);
  task->load_state(ckpt);
  if (!int8.empty())
    load_from([&] { int8.load_state_dict(ckpt.int8, group ? group->rank() : 0); }, ckpt.path,
              "the INT8 layers this run builds");
  dropped_int8_stats = int8.empty() && !ckpt.int8.empty();
  ckpt = Checkpoint();
}

std::string RunSetup::model_name() const { return given_model ? model->type_name() : recipe.text("model.name"); }

RunFacts RunSetup::facts(int world) const {
  RunFacts f{recipe.source(), model_name(), model->num_parameters(), describe(device), epochs, {}};
  if (world > 1) f.device += " x " + std::to_string(world) + " processes";
  for (const auto& l : int8.layers()) f.int8_layers.push_back(l.name);
  return f;
}

void log_run_start(const RunSetup& s, const std::string& dir, const std::string& resumed_from, int64_t step,
                   int world) {
  const bool resuming = !resumed_from.empty();
  const std::string origin =
      resuming ? "from " + resumed_from + " at step " + std::to_string(step) : "(" + s.recipe.source() + ")";
  spdlog::info("{} run {} {}: model {} with {} parameters, {}, on {}{}", resuming ? "resuming" : "starting", dir,
               origin, s.model_name(), s.model->num_parameters(), s.task->describe(), describe(s.device),
               world > 1 ? " x " + std::to_string(world) + " processes (each a shard of every batch)" : "");
  log_int8_training(s.int8);
  log_fusion(s.fusion);
  if (s.precision == DType::bf16) spdlog::info("precision: {}", autocast::describe(s.precision, s.device));
  if (s.init_report) {
    std::string kept;
    for (const auto& n : s.init_report->ignored) kept += (kept.empty() ? "" : ", ") + n;
    spdlog::info("model.init_from: {} tensors from {}{}", s.init_report->loaded, s.recipe.text("model.init_from"),
                 kept.empty() ? "" : "; left as initialized: " + kept);
  }
  if (s.dropped_int8_stats)
    spdlog::warn(
        "the checkpoint was trained with INT8 layers; this run (quant.int8_conv and quant.int8_linear false) "
        "continues in float");
  log_optimizer(*s.optimizer, s.recipe.text("optimizer.name"), s.model->num_parameters());
}

}  // namespace octet::train
