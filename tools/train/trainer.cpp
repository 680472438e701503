#include "tools/train/trainer.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>

#include "core/octet.h"
#include "optim/clip.h"
#include "tools/train/batch_stats.h"
#include "tools/train/checkpoint.h"
#include "tools/train/checkpoint_keeper.h"
#include "tools/train/dist_agreement.h"
#include "tools/train/dist_run.h"
#include "tools/train/evaluator.h"
#include "tools/train/metrics.h"
#include "tools/train/progress.h"
#include "tools/train/run_folder.h"
#include "tools/train/run_setup.h"
#include "tools/train/run_support.h"
#include "tools/train/tensorboard.h"
#include "tools/train/train_progress.h"
#include "tools/train/train_step.h"

namespace octet::train {

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

// The best evaluation of a run, as its done line states it (empty before any): a language
// model's (`lm`) valid perplexity, a classifier's test top-1.
std::string best_text(bool lm, const TrainState& state) {
  char buf[64] = "";
  if (lm && std::isfinite(state.best_loss))
    std::snprintf(buf, sizeof(buf), "; best valid perplexity %.2f", std::exp(state.best_loss));
  else if (!lm && state.best_top1 >= 0)
    std::snprintf(buf, sizeof(buf), "; best test top-1 %.2f%%", state.best_top1);
  return buf;
}

// One call of train(): the steps of a run, from the recipe (or the checkpoint to resume) to the
// last evaluation, each a method that reads top to bottom; run() is the loop itself. Its parts own
// one concern each: RunSetup what the recipe builds (run_setup.h), StepRunner the step
// (train_step.h), Evaluator the evaluations (evaluator.h), TrainProgress the bar and the train
// records (train_progress.h), RunFolder the run folder and its logs (run_folder.h),
// CheckpointKeeper the checkpoints (checkpoint_keeper.h), DistributedAgreement what the processes
// agree on (dist_agreement.h).
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
    for (int64_t epoch = state_.epoch; epoch < setup_->epochs; ++epoch) {
      if (!train_epoch(epoch)) return stop(false);
      evaluate_epoch(epoch);
      save_epoch_checkpoints(epoch);
      if (stop_after_epoch_ && epoch + 1 < setup_->epochs) return stop(true);
    }
    return finish();
  }

  bool resuming() const { return !opts_.resume.empty(); }

  // ---- set-up

  // Launched as several processes (mpirun, srun): each trains on its shard of every batch; rank 0
  // alone writes the run folder and the log. Then everything the recipe describes (RunSetup),
  // checked before anything is written, and the loop's parts.
  void build() {
    agree_ = DistributedAgreement(opts_.distributed ? training_group() : nullptr);
    if (dist::ProcessGroup* group = agree_.group()) {
      group->set_timeout_s(recipe_.real("train.dist_timeout_s"));
      if (!agree_.writer()) spdlog::set_level(spdlog::level::warn);
      agree_.check_same_recipe(recipe_);
    }
    setup_ =
        std::make_unique<RunSetup>(recipe_, opts_.model, resuming() ? &resume_.checkpoint : nullptr, agree_.group());
    build_parts();
  }

  void build_parts() {
    RunSetup& s = *setup_;
    folder_ = std::make_unique<RunFolder>(agree_.writer(), session_start_);
    // checkpoint.on_save_error: stop ends the run with an error; continue trains on.
    keeper_ = std::make_unique<CheckpointKeeper>(*folder_, recipe_.text("checkpoint.on_save_error"));
    keeper_->set_last_on_disk(resume_.last_on_disk);
    evaluator_ = std::make_unique<Evaluator>(*s.task, *s.model, *folder_, agree_, s.device);
    progress_ = std::make_unique<TrainProgress>(*folder_, agree_, *s.task, recipe_.boolean("log.progress"));
    // train.on_nonfinite: stop or skip (the recipe checked it).
    steps_ =
        std::make_unique<StepRunner>(*s.model, *s.optimizer, *s.schedule, *s.task, s.int8, agree_,
                                     StepPolicy{recipe_.real("train.clip_grad_norm"),
                                                recipe_.text("train.on_nonfinite"), s.read_every_step, s.precision});
  }

  // What the checkpoint holds (RunSetup::restore), and the train sums of the epoch in progress (the
  // stored ones are every rank's together: rank 0 carries them on).
  void restore_from_checkpoint() {
    setup_->restore(resume_.checkpoint, state_);
    if (state_.batch > 0 && agree_.writer()) resumed_epoch_ = state_.epoch_sums;
  }

  // Several processes: rank 0's weights to every rank, and gradients averaged in each backward.
  void start_data_parallel() {
    dist::ProcessGroup& group = *agree_.group();
    if (recipe_.boolean("train.sync_batchnorm"))
      spdlog::info("SyncBatchNorm: {} BatchNorm2d layers use the global batch's statistics",
                   convert_sync_batchnorm(*setup_->model, group));
    warn_of_launcher_keepalive(group);
    auto ddp = std::make_shared<DistributedDataParallel>(setup_->model, group);
    // Sharded optimizer state: each rank receives only its ranges of the averaged gradients.
    if (Optimizer& opt = *setup_->optimizer; opt.sharded())
      ddp->shard_gradients([&opt](const std::string& name) { return opt.shard_size(name); });
    steps_->set_ddp(std::move(ddp));
    // Each rank's batch is its block of the global one: dropout masks as one process draws them.
    dropout_shard_ = std::make_unique<DropoutShardGuard>(DropoutShard{group.rank(), group.size()});
  }

  // The run folder (a new one only now that everything above was valid), its logs and the start
  // of the log.
  void open_run_folder() {
    folder_->open(recipe_, resume_.run_dir, resuming() ? resume_.path : "", setup_->facts(agree_.world_size()));
    if (!agree_.writer()) return;  // another rank's run: rank 0 writes its folder
    result_.run_dir = folder_->dir();
    log_run_start(*setup_, folder_->dir(), resuming() ? resume_.path : "", state_.step, agree_.world_size());
  }

  // ---- the loop

  // The epoch's batches from state_.batch on; false when a stop (signal or train.max_steps) came
  // before its last batch. A stop at the last batch still evaluates the epoch (its best checkpoint,
  // the plateau schedule), as an uninterrupted run does, and stops after that.
  bool train_epoch(int64_t epoch) {
    setup_->model->train();
    setup_->task->start_epoch(*setup_->model, epoch, state_.batch);
    progress_->start_epoch(epoch, setup_->epochs, setup_->batches, resumed_epoch_);
    resumed_epoch_ = EpochSums{};
    for (int64_t b = state_.batch; b < setup_->batches; ++b) {
      train_step(epoch, b);
      ++state_.step;
      state_.batch = b + 1;
      const bool stop_now = agree_.stop_requested(opts_.stop, opts_.stop_signal) ||
                            (setup_->max_steps > 0 && state_.step >= setup_->max_steps);
      const bool record_now = state_.step % setup_->log_every == 0 || b + 1 == setup_->batches || stop_now;
      if (setup_->read_every_step || record_now) progress_->add(steps_->stats().drain());
      progress_->update(b + 1, setup_->optimizer->lr(0));
      if (record_now) record_interval(epoch, b);
      if (stop_now && b + 1 < setup_->batches) {
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
    const StepResult r = steps_->run(epoch, b, setup_->batches, state_.step);
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
    MetricRecord rec{
        "train",
        {{"step", static_cast<double>(state_.step)},
         {"epoch", static_cast<double>(epoch) + static_cast<double>(b + 1) / static_cast<double>(setup_->batches)},
         {"lr", setup_->optimizer->lr(0)}}};
    if (steps_->skipped_steps() > 0) rec.values["skipped_steps"] = static_cast<double>(steps_->skipped_steps());
    if (keeper_->failures() > 0) rec.values["save_failures"] = static_cast<double>(keeper_->failures());
    if (agree_.group()) {
      rec.values["world_size"] = static_cast<double>(agree_.world_size());
      rec.values["comm_wait_s"] = steps_->take_comm_wait_s();  // rank 0's wait for gradients after its backward passes
    }
    add_memory_stats(setup_->device, rec.values);
    progress_->record(std::move(rec), epoch, setup_->int8);
  }

  // The evaluation after an epoch (Evaluator) and the plateau schedule.
  void evaluate_epoch(int64_t epoch) {
    const EvalResult& ev = evaluator_->after_epoch(epoch, setup_->epochs, state_.step, progress_->finish_epoch());
    result_.last_eval = ev;
    state_.epoch = epoch + 1;
    state_.batch = 0;
    if (setup_->plateau && setup_->plateau->observe(ev.loss))
      spdlog::info("{} loss {:.4f} is no better than the best, {:.4f}: lr x {} -> {:.4g}", ev.split, ev.loss,
                   setup_->plateau->state().best, recipe_.real("schedule.gamma"),
                   setup_->optimizer->initial_lr(0) * setup_->schedule->factor(static_cast<double>(epoch + 1)));
  }

  // ---- checkpoints

  // best.safetensors when the epoch improved; last.safetensors every checkpoint.every_epochs (0:
  // none of these), at the end and before a stop.
  void save_epoch_checkpoints(int64_t epoch) {
    if (setup_->task->improves(evaluator_->last(), state_)) save("best.safetensors");
    const int64_t every = recipe_.integer("checkpoint.every_epochs");  // >= 0: the recipe checked it
    if ((every > 0 && (epoch + 1) % every == 0) || epoch + 1 == setup_->epochs || stop_after_epoch_)
      save("last.safetensors");
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
    setup_->task->save_state(task_tensors, task_metadata);  // on every rank: a task may gather its state from all
    const RunningSums sums = progress_->epoch_sums();       // likewise: every rank's share of the epoch so far
    // A sharded optimizer's state comes together from every rank's pieces (train.shard_optimizer).
    const NamedTensors optimizer_state =
        setup_->optimizer->sharded() || agree_.writer() ? setup_->optimizer->state_dict() : NamedTensors{};
    // The INT8 layers' stats, with each rank's own clips (every rank takes part).
    const NamedTensors int8_state = setup_->int8.state_dict(agree_.group());
    if (!agree_.writer()) return false;
    // After an epoch's evaluation (batch 0) the next epoch starts from zero.
    state_.epoch_sums = state_.batch > 0 ? static_cast<const EpochSums&>(sums) : EpochSums{};
    state_.rng_seed = default_generator().seed();
    state_.rng_offset = default_generator().offset();
    if (setup_->plateau) state_.plateau = setup_->plateau->state();
    save_checkpoint(path, setup_->model->state_dict(), optimizer_state, state_, recipe_.resolved_yaml(), int8_state,
                    task_tensors, task_metadata);
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
    std::string why = "by train.max_steps " + std::to_string(setup_->max_steps);
    if (signal > 0)
      why = std::string("by ") + signal_name(signal);
    else if (!(setup_->max_steps > 0 && state_.step >= setup_->max_steps))
      why = "on request";  // the caller's flag alone
    spdlog::info(
        "stopped at step {} (epoch {}, batch {} done) {}; checkpoint {}/last.safetensors; continue with "
        "`octet train --resume {}`",
        state_.step, state_.batch == 0 ? state_.epoch : state_.epoch + 1,
        state_.batch == 0 ? setup_->batches : state_.batch, why, folder_->dir(), folder_->dir());
    result_.stopped = true;
    result_.stop_signal = signal;
    result_.steps = state_.step;
    return result_;
  }

  // The run is complete: an error if its newest checkpoints are only in memory; the final test.
  TrainResult finish() {
    keeper_->check_all_written(state_.step);
    result_.steps = state_.step;
    result_.final_test = evaluator_->final_test(state_.step, setup_->epochs);
    spdlog::info("done: {} steps in {}{}; checkpoints and curves in {}", state_.step,
                 format_duration(folder_->wall_s()), best_text(setup_->lm, state_), folder_->dir());
    return result_;
  }

  const TrainOptions& opts_;
  Recipe recipe_;
  ResumePoint resume_;  // what a resumed run continues from
  TrainState state_;
  std::unique_ptr<RunSetup> setup_;                   // what the recipe builds
  std::unique_ptr<DropoutShardGuard> dropout_shard_;  // several processes
  // The parts.
  DistributedAgreement agree_;
  std::unique_ptr<RunFolder> folder_;
  std::unique_ptr<CheckpointKeeper> keeper_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<StepRunner> steps_;
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
