#include "tools/train/trainer.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

#include "core/octet.h"
#include "optim/clip.h"
#include "tools/train/batch_stats.h"
#include "tools/train/builders.h"
#include "tools/train/checkpoint.h"
#include "tools/train/checkpoint_keeper.h"
#include "tools/train/dist_agreement.h"
#include "tools/train/dist_run.h"
#include "tools/train/evaluator.h"
#include "tools/train/int8_run.h"
#include "tools/train/lm_task.h"
#include "tools/train/metrics.h"
#include "tools/train/progress.h"
#include "tools/train/run_folder.h"
#include "tools/train/run_support.h"
#include "tools/train/tensorboard.h"
#include "tools/train/torch_weights.h"
#include "tools/train/train_progress.h"
#include "tools/train/train_step.h"

namespace octet::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// One failing rank of several stops them all now, with its message: the others may wait in a
// collective for it. Returns only when this process trains alone.
void abort_job_if_distributed(const TrainOptions& opts, const std::exception& e) {
  if (!opts.distributed || !dist::mpi_built() || dist::launched_world_size() <= 1) return;
  const dist::ProcessGroup& g = dist::ProcessGroup::world();
  g.abort("octet train: rank " + std::to_string(g.rank()) + " of " + std::to_string(g.size()) + ": " + e.what());
}

// "SIGINT (Ctrl-C)", "SIGTERM", or "signal N".
std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT (Ctrl-C)";
  if (sig == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(sig);
}

// One call of train(): the steps of a run, from the recipe (or the checkpoint to resume) to the
// last evaluation, each a method that reads top to bottom; run() is the loop itself. Its parts own
// one concern each: StepRunner the step (train_step.h), Evaluator the evaluations (evaluator.h),
// RunFolder the run folder and its logs (run_folder.h), CheckpointKeeper the checkpoints
// (checkpoint_keeper.h), DistributedAgreement what the processes agree on (dist_agreement.h).
class TrainingLoop {
 public:
  TrainingLoop(const Recipe& recipe, const TrainOptions& opts) : opts_(opts), recipe_(recipe) {}

  // The run; an error that ends it goes into train.log too (the caller reports it on the console).
  TrainResult run() {
    try {
      TrainResult r = run_steps();
      drop_file_logs();
      return r;
    } catch (const std::exception& e) {
      if (progress_) progress_->end_line();
      log_error_to_files(e.what());
      drop_file_logs();
      // Several processes: the job ends now, before this loop's members are destroyed. Destroying an
      // all-reduce still in flight waits for its peers, and a stopped or cut-off peer never answers
      // (the job then outlived train.dist_timeout_s by minutes).
      abort_job_if_distributed(opts_, e);
      throw;
    }
  }

 private:
  TrainResult run_steps() {
    session_start_ = Clock::now();
    if (resuming()) {
      resume_ = read_resume_point(opts_.resume, opts_.overrides);
      recipe_ = resume_.recipe;
      state_ = resume_.checkpoint.state;
    }
    build();
    if (resuming()) restore_from_checkpoint();
    if (agree_.group()) start_data_parallel();
    open_run_folder();
    for (int64_t epoch = state_.epoch; epoch < epochs_; ++epoch) {
      if (!train_epoch(epoch)) return stop(false);
      evaluate_epoch(epoch);
      save_epoch_checkpoints(epoch);
      if (stop_after_epoch_ && epoch + 1 < epochs_) return stop(true);
    }
    return finish();
  }

  bool resuming() const { return !opts_.resume.empty(); }

  // ---- set-up

  // Everything the recipe describes, checked before anything is written. The data (and a language
  // model's vocabulary, which sizes the model) come first. The model is initialized on the CPU (the
  // same weights for every device), then moved, before the optimizer creates its state next to the
  // parameters.
  void build() {
    // Launched as several processes (mpirun, srun): each trains on its shard of every batch; rank 0
    // alone writes the run folder and the log.
    agree_ = DistributedAgreement(opts_.distributed ? training_group() : nullptr);
    dist::ProcessGroup* group = agree_.group();
    if (group) {
      group->set_timeout_s(recipe_.real("train.dist_timeout_s"));
      if (!agree_.writer()) spdlog::set_level(spdlog::level::warn);
      agree_.check_same_recipe(recipe_);
    }
    device_ = usable_device(recipe_.text("train.device"), "recipe train.device");
    // train.device: cuda under mpirun: each process the GPU of its rank on its host.
    if (group && device_.is_cuda() && recipe_.text("train.device") == "cuda")
      device_ = Device::cuda(group->local_rank() % std::max(1, cuda_device_count()));
    use_threads(recipe_.integer("train.threads"), "train.threads");
    manual_seed(static_cast<uint64_t>(recipe_.integer("train.seed")));
    epochs_ = recipe_.integer("train.epochs");  // >= 1: the recipe checked it
    task_ = make_task(recipe_, device_, true, resuming() ? &resume_.checkpoint : nullptr, "", group);
    lm_ = task_->vocab_size() > 0;
    model_ = opts_.model ? opts_.model : build_model_from(recipe_, task_->vocab_size());
    // model.init_from: the starting weights (a resume has its own).
    if (!resuming() && !recipe_.text("model.init_from").empty())
      init_report_ = init_from_file(*model_, recipe_.text("model.init_from"),
                                    {recipe_.boolean("model.init_strict"), recipe_.text_list("model.init_ignore")});
    int8_ = Int8Run(build_int8(recipe_, *model_));
    use_device(device_, recipe_.boolean("train.allow_tf32"));
    model_->to(device_);
    optimizer_ = build_optimizer(recipe_, model_->named_parameters());
    schedule_ = build_schedule(recipe_, &plateau_);
    log_every_ = recipe_.integer("log.every_steps");  // >= 1: the recipe checked it
    max_steps_ = recipe_.integer("train.max_steps");
    nb_ = task_->batches_per_epoch();
    OCTET_CHECK(nb_ >= 1, "train: the training data makes no batch");
    // The CPU reads loss and accuracy every step; a GPU keeps them until the next metric record.
    read_every_step_ = device_.is_cpu();
    build_parts();
  }

  void build_parts() {
    folder_ = std::make_unique<RunFolder>(agree_.writer(), session_start_);
    // checkpoint.on_save_error: stop ends the run with an error; continue trains on.
    keeper_ = std::make_unique<CheckpointKeeper>(*folder_, recipe_.text("checkpoint.on_save_error"));
    keeper_->set_last_on_disk(resume_.last_on_disk);
    evaluator_ = std::make_unique<Evaluator>(*task_, *model_, *folder_, agree_, device_);
    progress_ = std::make_unique<TrainProgress>(*folder_, agree_, *task_, recipe_.boolean("log.progress"));
    // train.on_nonfinite: stop or skip (the recipe checked it).
    steps_ = std::make_unique<StepRunner>(
        *model_, *optimizer_, *schedule_, *task_, int8_, agree_,
        StepPolicy{recipe_.real("train.clip_grad_norm"), recipe_.text("train.on_nonfinite"), read_every_step_});
  }

  // The model, optimizer, RNG, schedule, task and INT8 layers continue where the checkpoint was;
  // loading copies host tensors into device ones.
  void restore_from_checkpoint() {
    Checkpoint& ckpt = resume_.checkpoint;
    const std::string built = opts_.model ? "the model given to train() (" + opts_.model->type_name() + ")"
                                          : "the model this run builds (model.name " + recipe_.text("model.name") + ")";
    load_model_from(*model_, ckpt.model, ckpt.path, built);
    load_from([&] { optimizer_->load_state_dict(ckpt.optimizer); }, ckpt.path,
              "the optimizer this run builds (optimizer.name " + recipe_.text("optimizer.name") + ")");
    default_generator().set_state(state_.rng_seed, state_.rng_offset);
    if (plateau_) plateau_->set_state(state_.plateau);
    task_->load_state(ckpt);
    if (!int8_.empty())
      load_from([&] { int8_.load_state_dict(ckpt.int8); }, ckpt.path, "the INT8 layers this run builds");
    dropped_int8_stats_ = int8_.empty() && !ckpt.int8.empty();
    // The train sums of the epoch in progress (the stored ones are every rank's together: rank 0
    // carries them on).
    if (state_.batch > 0 && agree_.writer()) resumed_epoch_ = state_.epoch_sums;
    ckpt = Checkpoint();  // the tensors now live in the model and optimizer
  }

  // Several processes: rank 0's weights to every rank, and gradients averaged in each backward.
  void start_data_parallel() {
    dist::ProcessGroup& group = *agree_.group();
    if (recipe_.boolean("train.sync_batchnorm"))
      spdlog::info("SyncBatchNorm: {} BatchNorm2d layers use the global batch's statistics",
                   convert_sync_batchnorm(*model_, group));
    steps_->set_ddp(std::make_shared<DistributedDataParallel>(model_, group));
    // Each rank's batch is its block of the global one: dropout masks as one process draws them.
    dropout_shard_ = std::make_unique<DropoutShardGuard>(DropoutShard{group.rank(), group.size()});
  }

  // The run folder (a new one only now that everything above was valid), its logs and the start
  // of the log.
  void open_run_folder() {
    folder_->open(recipe_, resume_.run_dir, resuming() ? resume_.path : "", run_facts());
    if (!agree_.writer()) return;  // another rank's run: rank 0 writes its folder
    result_.run_dir = folder_->dir();
    const std::string origin =
        resuming() ? "from " + resume_.path + " at step " + std::to_string(state_.step) : "(" + recipe_.source() + ")";
    const int world = agree_.world_size();
    spdlog::info("{} run {} {}: model {} with {} parameters, {}, on {}{}", resuming() ? "resuming" : "starting",
                 folder_->dir(), origin, model_name(), model_->num_parameters(), task_->describe(), describe(device_),
                 agree_.group() ? " x " + std::to_string(world) + " processes (each a shard of every batch)" : "");
    log_int8_training(int8_);
    if (init_report_) {
      std::string kept;
      for (const auto& n : init_report_->ignored) kept += (kept.empty() ? "" : ", ") + n;
      spdlog::info("model.init_from: {} tensors from {}{}", init_report_->loaded, recipe_.text("model.init_from"),
                   kept.empty() ? "" : "; left as initialized: " + kept);
    }
    if (dropped_int8_stats_)
      spdlog::warn("the checkpoint was trained with INT8 layers; this run (quant.int8_conv: false) continues in float");
    log_optimizer(*optimizer_, recipe_.text("optimizer.name"), model_->num_parameters());
  }

  std::string model_name() const { return opts_.model ? opts_.model->type_name() : recipe_.text("model.name"); }

  // What the run's page says of it (metrics.h).
  RunFacts run_facts() const {
    RunFacts f{recipe_.source(), model_name(), model_->num_parameters(), describe(device_), epochs_, {}};
    if (agree_.group()) f.device += " x " + std::to_string(agree_.world_size()) + " processes";
    for (const auto& l : int8_.layers()) f.int8_layers.push_back(l.name);
    return f;
  }

  // ---- the loop

  // The epoch's batches from state_.batch on; false when a stop (signal or train.max_steps) came
  // before its last batch. A stop at the last batch still evaluates the epoch (its best checkpoint,
  // the plateau schedule), as an uninterrupted run does, and stops after that.
  bool train_epoch(int64_t epoch) {
    model_->train();
    task_->start_epoch(*model_, epoch, state_.batch);
    progress_->start_epoch(epoch, epochs_, nb_, resumed_epoch_);
    resumed_epoch_ = EpochSums{};
    for (int64_t b = state_.batch; b < nb_; ++b) {
      train_step(epoch, b);
      ++state_.step;
      state_.batch = b + 1;
      const bool stop_now =
          agree_.stop_requested(opts_.stop, opts_.stop_signal) || (max_steps_ > 0 && state_.step >= max_steps_);
      const bool record_now = state_.step % log_every_ == 0 || b + 1 == nb_ || stop_now;
      if (read_every_step_ || record_now) progress_->add(steps_->stats().drain());
      progress_->update(b + 1, optimizer_->lr(0));
      if (record_now) record_interval(epoch, b);
      if (stop_now && b + 1 < nb_) {
        state_.epoch = epoch;
        return false;
      }
      stop_after_epoch_ = stop_now;
    }
    return true;
  }

  // Batch b's step (StepRunner); a non-finite loss or gradient stops the run or skips the update
  // (train.on_nonfinite), said here.
  void train_step(int64_t epoch, int64_t b) {
    const StepResult r = steps_->run(epoch, b, nb_, state_.step);
    if (r.stop) {
      folder_->write_curves();
      OCTET_FAIL("train: ", r.nonfinite, "; stopped before updating the weights (train.on_nonfinite: stop); ",
                 keeper_->on_disk_text(),
                 ". Lower the learning rate, clip gradients (train.clip_grad_norm) or set train.on_nonfinite: skip");
    }
    if (r.updated) return;
    progress_->end_line();
    spdlog::warn("{}; step skipped (train.on_nonfinite: skip; {} skipped so far)", r.nonfinite,
                 steps_->skipped_steps());
    progress_->skipped(r.skipped_examples);
  }

  // The metric record of the interval that ended at batch b (TrainProgress adds the loss and rate).
  void record_interval(int64_t epoch, int64_t b) {
    MetricRecord rec{"train",
                     {{"step", static_cast<double>(state_.step)},
                      {"epoch", static_cast<double>(epoch) + static_cast<double>(b + 1) / static_cast<double>(nb_)},
                      {"lr", optimizer_->lr(0)}}};
    if (steps_->skipped_steps() > 0) rec.values["skipped_steps"] = static_cast<double>(steps_->skipped_steps());
    if (keeper_->failures() > 0) rec.values["save_failures"] = static_cast<double>(keeper_->failures());
    if (agree_.group()) {
      rec.values["world_size"] = static_cast<double>(agree_.world_size());
      rec.values["comm_wait_s"] = steps_->take_comm_wait_s();  // rank 0's wait for gradients after its backward passes
    }
    add_memory_stats(device_, rec.values);
    progress_->record(std::move(rec), epoch, int8_);
  }

  // The evaluation after an epoch (Evaluator) and the plateau schedule.
  void evaluate_epoch(int64_t epoch) {
    const EvalResult& ev = evaluator_->after_epoch(epoch, epochs_, state_.step, progress_->finish_epoch());
    result_.last_eval = ev;
    state_.epoch = epoch + 1;
    state_.batch = 0;
    if (plateau_ && plateau_->observe(ev.loss))
      spdlog::info("{} loss {:.4f} is no better than the best, {:.4f}: lr x {} -> {:.4g}", ev.split, ev.loss,
                   plateau_->state().best, recipe_.real("schedule.gamma"),
                   optimizer_->initial_lr(0) * schedule_->factor(static_cast<double>(epoch + 1)));
  }

  // ---- checkpoints

  // best.safetensors when the epoch improved; last.safetensors every checkpoint.every_epochs (0:
  // none of these), at the end and before a stop.
  void save_epoch_checkpoints(int64_t epoch) {
    if (task_->improves(evaluator_->last(), state_)) save("best.safetensors");
    const int64_t every = recipe_.integer("checkpoint.every_epochs");  // >= 0: the recipe checked it
    if ((every > 0 && (epoch + 1) % every == 0) || epoch + 1 == epochs_ || stop_after_epoch_) save("last.safetensors");
    folder_->write_curves();
  }

  void save(const std::string& name, bool required = false) {
    keeper_->save(
        name, state_.step, [this](const std::string& path) { return write_checkpoint(path); }, required);
  }

  // The checkpoint's contents, gathered on every rank, written by rank 0 (true when this rank wrote).
  bool write_checkpoint(const std::string& path) {
    NamedTensors task_tensors;
    Metadata task_metadata;
    task_->save_state(task_tensors, task_metadata);    // on every rank: a task may gather its state from all
    const RunningSums sums = progress_->epoch_sums();  // likewise: every rank's share of the epoch so far
    if (!agree_.writer()) return false;
    // After an epoch's evaluation (batch 0) the next epoch starts from zero.
    state_.epoch_sums = state_.batch > 0 ? static_cast<const EpochSums&>(sums) : EpochSums{};
    state_.rng_seed = default_generator().seed();
    state_.rng_offset = default_generator().offset();
    if (plateau_) state_.plateau = plateau_->state();
    save_checkpoint(path, model_->state_dict(), optimizer_->state_dict(), state_, recipe_.resolved_yaml(),
                    int8_.state_dict(), task_tensors, task_metadata);
    return true;
  }

  // ---- the end

  // Stopped by a signal or train.max_steps: last.safetensors holds the position (state.epoch and
  // state.batch) to resume from. Every rank takes part in a save (the epoch's sums and a task's
  // state are gathered from all), while only rank 0 knows of a failed one.
  TrainResult stop(bool saved) {
    if (agree_.any(!saved || keeper_->unwritten("last.safetensors"))) save("last.safetensors", true);
    folder_->write_curves();
    progress_->end_line();
    const int signal = agree_.stop_signal();
    std::string why = "by train.max_steps " + std::to_string(max_steps_);
    if (signal > 0)
      why = std::string("by ") + signal_name(signal);
    else if (!(max_steps_ > 0 && state_.step >= max_steps_))
      why = "on request";  // the caller's flag alone
    spdlog::info(
        "stopped at step {} (epoch {}, batch {} done) {}; checkpoint {}/last.safetensors; continue with "
        "`octet train --resume {}`",
        state_.step, state_.batch == 0 ? state_.epoch : state_.epoch + 1, state_.batch == 0 ? nb_ : state_.batch, why,
        folder_->dir(), folder_->dir());
    result_.stopped = true;
    result_.stop_signal = signal;
    result_.steps = state_.step;
    return result_;
  }

  // The run is complete: an error if its newest checkpoints are only in memory; the final test.
  TrainResult finish() {
    keeper_->check_all_written(state_.step);
    result_.steps = state_.step;
    result_.final_test = evaluator_->final_test(state_.step, epochs_);
    spdlog::info("done: {} steps in {}{}; checkpoints and curves in {}", state_.step,
                 format_duration(folder_->wall_s()), best_text(), folder_->dir());
    return result_;
  }

  // The best evaluation of the run, as the done line states it (empty before any).
  std::string best_text() const {
    char buf[64] = "";
    if (lm_ && std::isfinite(state_.best_loss))
      std::snprintf(buf, sizeof(buf), "; best valid perplexity %.2f", std::exp(state_.best_loss));
    else if (!lm_ && state_.best_top1 >= 0)
      std::snprintf(buf, sizeof(buf), "; best test top-1 %.2f%%", state_.best_top1);
    return buf;
  }

  const TrainOptions& opts_;
  Recipe recipe_;
  ResumePoint resume_;  // what a resumed run continues from
  TrainState state_;
  Device device_ = Device::cpu();
  // What the recipe builds.
  std::unique_ptr<Task> task_;
  bool lm_ = false;
  std::shared_ptr<Module> model_;
  Int8Run int8_{{}};
  bool dropped_int8_stats_ = false;
  std::optional<InitFromReport> init_report_;  // model.init_from's, for the log
  std::unique_ptr<Optimizer> optimizer_;
  std::shared_ptr<PlateauSchedule> plateau_;
  std::shared_ptr<LrSchedule> schedule_;
  std::unique_ptr<DropoutShardGuard> dropout_shard_;  // several processes
  // The parts.
  DistributedAgreement agree_;
  std::unique_ptr<RunFolder> folder_;
  std::unique_ptr<CheckpointKeeper> keeper_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<StepRunner> steps_;
  // The recipe's policies.
  int64_t epochs_ = 0, nb_ = 0, log_every_ = 1, max_steps_ = 0;
  bool read_every_step_ = true;
  std::unique_ptr<TrainProgress> progress_;
  EpochSums resumed_epoch_;  // the checkpoint's sums for the epoch a resumed run continues
  Clock::time_point session_start_;
  bool stop_after_epoch_ = false;
  TrainResult result_;
};

}  // namespace

TrainResult train(const Recipe& recipe, const TrainOptions& opts) {
  try {
    return TrainingLoop(recipe, opts).run();
  } catch (const std::exception& e) {
    abort_job_if_distributed(opts, e);  // an error before the loop ran (the loop aborts for its own)
    throw;
  }
}

}  // namespace octet::train
