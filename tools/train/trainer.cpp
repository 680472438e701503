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
#include "tools/train/dist_run.h"
#include "tools/train/int8_run.h"
#include "tools/train/lm_task.h"
#include "tools/train/metrics.h"
#include "tools/train/progress.h"
#include "tools/train/run_support.h"
#include "tools/train/tensorboard.h"
#include "tools/train/torch_weights.h"

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

// Loss and accuracy summed over the steps of a log interval or an epoch; `skipped`: the examples of
// skipped steps (train.on_nonfinite: skip), in the rate but not in the loss and accuracy. An epoch's
// sums travel in checkpoints (TrainState::epoch_sums).
struct Running : EpochSums {
  void add(const BatchStats& st) {
    loss += st.loss * static_cast<double>(st.n);
    n += st.n;
    correct += st.top1;
  }
  double mean_loss() const { return loss / std::max<double>(1, static_cast<double>(n)); }
};

// One call of train(): the steps of a run, from the recipe (or the checkpoint to resume) to the
// last evaluation, each a method that reads top to bottom. run() is the loop itself.
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
      if (bar_) bar_->end_line();
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
    if (!opts_.resume.empty()) read_checkpoint_to_resume();
    build();
    if (resuming()) restore_from_checkpoint();
    // Several processes: rank 0's weights to every rank, and gradients averaged in each backward.
    if (group_) {
      if (recipe_.boolean("train.sync_batchnorm"))
        spdlog::info("SyncBatchNorm: {} BatchNorm2d layers use the global batch's statistics",
                     convert_sync_batchnorm(*model_, *group_));
      ddp_ = std::make_shared<DistributedDataParallel>(model_, *group_);
      // Each rank's batch is its block of the global one: dropout masks as one process draws them.
      dropout_shard_ = std::make_unique<DropoutShardGuard>(DropoutShard{group_->rank(), group_->size()});
    }
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

  // The checkpoint's recipe (with the caller's overrides), position and run folder.
  void read_checkpoint_to_resume() {
    const std::string path = fs::is_directory(opts_.resume) ? opts_.resume + "/last.safetensors" : opts_.resume;
    ckpt_ = load_checkpoint(path);
    OCTET_CHECK(ckpt_.quant_assignment.empty() && !ckpt_.optimizer.empty(), "train --resume: ", path,
                " is an export (octet export): it holds a model for inference, not the optimizer state a run "
                "continues from; resume from the run's folder or its last.safetensors");
    recipe_ = parse_stored_recipe(ckpt_.recipe_yaml, path + " (recipe)", opts_.overrides);
    // An override of a key that shapes the weights or the optimizer's state would fail only when the
    // checkpoint is loaded, as a list of every tensor name that does not fit.
    const Recipe stored = parse_stored_recipe(ckpt_.recipe_yaml, path + " (recipe)");
    const std::string key = first_changed(stored, recipe_, keys_fixed_on_resume());
    OCTET_USAGE_CHECK(key.empty(), "train --resume ", opts_.resume, ": ", key,
                      " cannot change on resume (the checkpoint's weights and optimizer state are for ", key, ": ",
                      stored.value_yaml(key), ", the override asks for ", recipe_.value_yaml(key),
                      "); start a new run to train with it");
    state_ = ckpt_.state;
    // A checkpoint outside a run folder (copied elsewhere, or into the current folder) continues in a
    // new run folder, as a new run would make it; its own folder is left as it is.
    run_dir_ = run_dir_of(path);
    if (!is_run_folder(run_dir_)) run_dir_.clear();
    resumed_from_ = path;
    // A run stopped by train.max_steps: training on would pass the limit by a step each time.
    const int64_t max_steps = recipe_.integer("train.max_steps");
    const bool epochs_left = state_.epoch < recipe_.integer("train.epochs");
    OCTET_CHECK(max_steps == 0 || state_.step < max_steps || !epochs_left, "train: ", path, " is at step ", state_.step,
                ", and train.max_steps is ", max_steps, ": nothing to train. Raise train.max_steps to train on (e.g. ",
                "`octet train --resume ", opts_.resume, " train.max_steps=", state_.step + max_steps,
                "`; 0: no limit)");
    // The step of last.safetensors on disk, where known.
    std::error_code ec;
    if (!run_dir_.empty() && fs::equivalent(path, run_dir_ + "/last.safetensors", ec)) last_on_disk_ = state_.step;
  }

  // Everything the recipe describes, checked before anything is written. The data (and a language
  // model's vocabulary, which sizes the model) come first. The model is initialized on the CPU (the
  // same weights for every device), then moved, before the optimizer creates its state next to the
  // parameters.
  void build() {
    // Launched as several processes (mpirun, srun): each trains on its shard of every batch; rank 0
    // alone writes the run folder and the log.
    group_ = opts_.distributed ? training_group() : nullptr;
    if (group_) {
      group_->set_timeout_s(recipe_.real("train.dist_timeout_s"));
      writer_ = group_->rank() == 0;
      if (!writer_) spdlog::set_level(spdlog::level::warn);
      check_same_recipe_everywhere();
    }
    device_ = usable_device(recipe_.text("train.device"), "recipe train.device");
    // train.device: cuda under mpirun: each process the GPU of its rank on its host.
    if (group_ && device_.is_cuda() && recipe_.text("train.device") == "cuda")
      device_ = Device::cuda(group_->local_rank() % std::max(1, cuda_device_count()));
    use_threads(recipe_.integer("train.threads"), "train.threads");
    manual_seed(static_cast<uint64_t>(recipe_.integer("train.seed")));
    epochs_ = recipe_.integer("train.epochs");  // >= 1: the recipe checked it
    task_ = make_task(recipe_, device_, true, resuming() ? &ckpt_ : nullptr, "", group_);
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
    clip_ = recipe_.real("train.clip_grad_norm");
    on_nonfinite_ = recipe_.text("train.on_nonfinite");  // stop or skip (the recipe checked it)
    // checkpoint.on_save_error (save()): stop ends the run with an error; continue trains on.
    on_save_error_ = recipe_.text("checkpoint.on_save_error");
    nb_ = task_->batches_per_epoch();
    OCTET_CHECK(nb_ >= 1, "train: the training data makes no batch");
    rate_key_ = lm_ ? "tokens_per_s" : "samples_per_s";
    params_ = model_->parameters();
    buffers_ = model_->buffers();
    // The CPU reads loss and accuracy every step; a GPU keeps them until the next metric record.
    read_every_step_ = device_.is_cpu();
  }

  // The model, optimizer, RNG, schedule, task and INT8 layers continue where the checkpoint was;
  // loading copies host tensors into device ones.
  void restore_from_checkpoint() {
    const std::string built = opts_.model ? "the model given to train() (" + opts_.model->type_name() + ")"
                                          : "the model this run builds (model.name " + recipe_.text("model.name") + ")";
    load_model_from(*model_, ckpt_.model, ckpt_.path, built);
    load_from([&] { optimizer_->load_state_dict(ckpt_.optimizer); }, ckpt_.path,
              "the optimizer this run builds (optimizer.name " + recipe_.text("optimizer.name") + ")");
    default_generator().set_state(state_.rng_seed, state_.rng_offset);
    if (plateau_) plateau_->set_state(state_.plateau);
    task_->load_state(ckpt_);
    if (!int8_.empty()) {
      load_from([&] { int8_.load_state_dict(ckpt_.int8); }, ckpt_.path, "the INT8 layers this run builds");
    }
    dropped_int8_stats_ = int8_.empty() && !ckpt_.int8.empty();
    // The train sums of the epoch in progress (the stored ones are every rank's together: rank 0
    // carries them on).
    if (state_.batch > 0 && writer_) resumed_epoch_ = state_.epoch_sums;
    ckpt_ = Checkpoint();  // the tensors now live in the model and optimizer
  }

  // The run folder (a new one only now that everything above was valid), its logs and the start
  // of the log.
  void open_run_folder() {
    if (!writer_) return;  // another rank's run: rank 0 writes its folder
    const bool new_folder = run_dir_.empty();
    if (new_folder) run_dir_ = new_run_dir(recipe_);
    result_.run_dir = run_dir_;
    add_file_log(run_dir_ + "/train.log");
    if (resuming() && new_folder)
      spdlog::info("{} is not in a run folder: the run continues in {}", resumed_from_, run_dir_);
    if (!new_folder) point_at_run();  // it has a checkpoint already
    write_file_atomic(run_dir_ + "/recipe.yaml", recipe_.resolved_yaml());
    metrics_ = std::make_unique<MetricsLog>(run_dir_, resuming());
    // Wall time goes on from the last record of the sessions before (their time between a record
    // and a stop is lost: at most a log interval each).
    for (const MetricRecord& r : metrics_->records())
      if (auto w = r.values.find("wall_s"); w != r.values.end() && std::isfinite(w->second))
        wall_before_ = std::max(wall_before_, w->second);
    metrics_->set_facts(run_facts());
    if (recipe_.boolean("log.tensorboard")) tb_ = std::make_unique<TensorBoardWriter>(run_dir_ + "/tensorboard");
    const std::string origin =
        resuming() ? "from " + resumed_from_ + " at step " + std::to_string(state_.step) : "(" + recipe_.source() + ")";
    spdlog::info("{} run {} {}: model {} with {} parameters, {}, on {}{}", resuming() ? "resuming" : "starting",
                 run_dir_, origin, opts_.model ? opts_.model->type_name() : recipe_.text("model.name"),
                 model_->num_parameters(), task_->describe(), describe(device_),
                 group_ ? " x " + std::to_string(group_->size()) + " processes (each a shard of every batch)" : "");
    if (!int8_.empty()) {
      std::string names;
      for (const auto& l : int8_.layers()) names += (names.empty() ? "" : ", ") + l.name;
      const quant::Int8Config& c = int8_.layers()[0].layer->config;
      spdlog::info("INT8 training of {} convolutions ({}); DSGC {} (every {} steps), stochastic rounding {}, DCLR {}",
                   int8_.layers().size(), names, c.dsgc ? "on" : "off", c.clip_update_period,
                   c.stochastic_rounding ? "on" : "off", c.dclr ? "on" : "off");
    }
    if (init_report_) {
      std::string kept;
      for (const auto& n : init_report_->ignored) kept += (kept.empty() ? "" : ", ") + n;
      spdlog::info("model.init_from: {} tensors from {}{}", init_report_->loaded, recipe_.text("model.init_from"),
                   kept.empty() ? "" : "; left as initialized: " + kept);
    }
    if (dropped_int8_stats_)
      spdlog::warn("the checkpoint was trained with INT8 layers; this run (quant.int8_conv: false) continues in float");
    // The optimizer's memory: bytes of state per parameter (8 for 32-bit Adam, about 2 for 8-bit).
    const double per_param =
        static_cast<double>(optimizer_->state_bytes()) / std::max<double>(1, model_->num_parameters());
    spdlog::info("optimizer {}: {:.3f} MB of state, {:.3f} bytes per parameter ({} tensors with 8-bit state)",
                 recipe_.text("optimizer.name"), static_cast<double>(optimizer_->state_bytes()) / 1e6, per_param,
                 optimizer_->num_8bit_params());
    // What each optimizer.param_groups entry took (group i + 1; the first match wins), to check its globs by.
    for (size_t g = 1; g < optimizer_->num_groups(); ++g) {
      constexpr size_t kShown = 6;
      const NamedTensors& params = optimizer_->params(g);
      std::string names;
      for (size_t i = 0; i < params.size() && i < kShown; ++i) names += (i ? ", " : "") + params[i].first;
      if (params.size() > kShown) names += ", ...";
      spdlog::info("optimizer.param_groups[{}]: {} tensors, lr {:.4g} (before the schedule), state_bits {}: {}", g - 1,
                   params.size(), optimizer_->initial_lr(g), optimizer_->state_options(params.front().first).state_bits_,
                   names);
    }
  }

  // What the run's page says of it (metrics.h).
  RunFacts run_facts() const {
    RunFacts f{recipe_.source(),
               opts_.model ? opts_.model->type_name() : recipe_.text("model.name"),
               model_->num_parameters(),
               describe(device_),
               epochs_,
               {}};
    if (group_) f.device += " x " + std::to_string(group_->size()) + " processes";
    for (const auto& l : int8_.layers()) f.int8_layers.push_back(l.name);
    return f;
  }

  // Seconds of the run so far, over all its sessions: the "wall_s" of metric records.
  double wall_s() const { return wall_before_ + std::chrono::duration<double>(Clock::now() - session_start_).count(); }

  // ---- the loop

  // The epoch's batches from state_.batch on; false when a stop (signal or train.max_steps) came
  // before its last batch. A stop at the last batch still evaluates the epoch (its best checkpoint,
  // the plateau schedule), as an uninterrupted run does, and stops after that.
  bool train_epoch(int64_t epoch) {
    model_->train();
    task_->start_epoch(*model_, epoch, state_.batch);
    bar_ = std::make_unique<ProgressBar>("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs_), nb_,
                                         writer_ && recipe_.boolean("log.progress"), task_->units_per_step(),
                                         task_->unit());
    interval_ = Running{}, epoch_ = Running{resumed_epoch_};
    resumed_epoch_ = EpochSums{};
    interval_start_ = Clock::now();
    for (int64_t b = state_.batch; b < nb_; ++b) {
      train_step(epoch, b);
      ++state_.step;
      state_.batch = b + 1;
      const bool stop_now = agreed_stop() || (max_steps_ > 0 && state_.step >= max_steps_);
      const bool record_now = state_.step % log_every_ == 0 || b + 1 == nb_ || stop_now;
      if (read_every_step_ || record_now)
        for (const BatchStats& st : step_stats_.drain()) interval_.add(st), epoch_.add(st);
      char lr_text[32];
      std::snprintf(lr_text, sizeof(lr_text), "lr %.4g", optimizer_->lr(0));
      bar_->update(b + 1, epoch_.n > 0 ? stats_text(epoch_) + " " + lr_text : std::string(lr_text));
      if (record_now) record_interval(epoch, b);
      if (stop_now && b + 1 < nb_) {
        state_.epoch = epoch;
        return false;
      }
      stop_after_epoch_ = stop_now;
    }
    return true;
  }

  // Forward, backward, gradient clip, DCLR and the update of batch b; a non-finite loss or
  // gradient stops the run or skips the update (train.on_nonfinite).
  void train_step(int64_t epoch, int64_t b) {
    apply_schedule(*optimizer_, *schedule_, static_cast<double>(epoch) + static_cast<double>(b) / double(nb_));
    // A skipped step must not leave its forward pass's buffer updates (batch-norm running
    // statistics of non-finite activations) behind: they are restored from this copy.
    std::vector<Tensor> buffers_before;
    if (on_nonfinite_ == "skip")
      for (const Tensor& t : buffers_) buffers_before.push_back(t.clone());
    StepOutput out = task_->step(*model_, b);
    optimizer_->zero_grad();
    if (ddp_) ddp_->prepare_for_backward(out.loss);
    out.loss.backward();
    if (ddp_) {
      ddp_->check_synchronized();
      comm_wait_s_ += ddp_->last_wait_s();
    }
    // The global gradient norm, accumulated in double, is finite exactly when every gradient is
    // (clip_grad_norm leaves non-finite gradients unscaled).
    const double grad_norm = clip_grad_norm(params_, clip_ > 0 ? clip_ : kNoClip);
    if (!int8_.empty()) {
      average_int8_distances();
      int8_.after_backward(state_.step + 1);
      int8_.apply_dclr(*optimizer_);  // each INT8 layer's lr factor from this backward pass's d_c
    }
    // The loss is read here only where it is read every step anyway (the CPU): on a GPU a
    // non-finite loss shows in its gradients.
    // Several processes decide on the averaged gradients alone, the same on every rank (a rank's
    // non-finite loss makes them non-finite).
    if (std::isfinite(grad_norm) && (ddp_ || !read_every_step_ || std::isfinite(out.loss.item()))) {
      optimizer_->step();
    } else {
      const std::string what = nonfinite_text(*model_, out.loss, state_.step + 1, epoch, b);
      if (on_nonfinite_ == "stop") {
        if (metrics_) metrics_->write_curves();
        OCTET_FAIL("train: ", what, "; stopped before updating the weights (train.on_nonfinite: stop); ",
                   on_disk_text(),
                   ". Lower the learning rate, clip gradients (train.clip_grad_norm) or set train.on_nonfinite: skip");
      }
      ++skipped_steps_;
      bar_->end_line();
      spdlog::warn("{}; step skipped (train.on_nonfinite: skip; {} skipped so far)", what, skipped_steps_);
      optimizer_->zero_grad();
      NoGradGuard no_grad;
      for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(buffers_before[i]);
      task_->skip_step();
      interval_.skipped += out.labels.size(0), epoch_.skipped += out.labels.size(0);
      return;  // its loss and accuracy are not the model's: the metrics count it in skipped_steps alone
    }
    step_stats_.push(out.loss, out.logits, out.labels);
  }

  // The metric record of the interval that ended at batch b: metrics.jsonl, TensorBoard and, without
  // a progress bar, the log.
  void record_interval(int64_t epoch, int64_t b) {
    const double secs = std::chrono::duration<double>(Clock::now() - interval_start_).count();
    interval_ = over_ranks(interval_);
    const double n = static_cast<double>(interval_.n);
    // An interval of skipped steps alone has no loss or accuracy (null in metrics.jsonl).
    const double none = std::numeric_limits<double>::quiet_NaN();
    MetricRecord rec{"train",
                     {{"step", static_cast<double>(state_.step)},
                      {"epoch", static_cast<double>(epoch) + static_cast<double>(b + 1) / static_cast<double>(nb_)},
                      {"loss", n > 0 ? interval_.loss / n : none},
                      {"top1", n > 0 ? 100.0 * static_cast<double>(interval_.correct) / n : none},
                      {"lr", optimizer_->lr(0)},
                      {rate_key_, secs > 0 ? (n + static_cast<double>(interval_.skipped)) / secs : 0.0},
                      {"wall_s", wall_s()}}};
    if (lm_) rec.values["ppl"] = std::exp(rec.values["loss"]);
    if (skipped_steps_ > 0) rec.values["skipped_steps"] = static_cast<double>(skipped_steps_);
    if (save_failures_ > 0) rec.values["save_failures"] = static_cast<double>(save_failures_);
    if (group_) {
      rec.values["world_size"] = static_cast<double>(group_->size());
      rec.values["comm_wait_s"] = comm_wait_s_;  // rank 0's wait for gradients after its backward passes
      comm_wait_s_ = 0;
    }
    add_memory_stats(device_, rec.values);
    if (!writer_) {
      interval_ = Running{};
      interval_start_ = Clock::now();
      return;
    }
    metrics_->record(rec);
    if (!int8_.empty()) metrics_->record(int8_.record(state_.step, rec.values["epoch"]));
    if (tb_) {
      for (const std::string& k : {std::string("loss"), std::string("top1"), std::string("lr"), rate_key_})
        tb_->add_scalar("train/" + k, static_cast<float>(rec.values[k]), state_.step);
      if (!int8_.empty()) int8_.add_scalars(*tb_, state_.step);
      tb_->flush();
    }
    if (!ProgressBar::terminal() || !recipe_.boolean("log.progress")) {
      spdlog::info("epoch {} step {}: {} lr {:.4g} {:.0f} {}/s", epoch + 1, state_.step, stats_text(interval_),
                   rec.values["lr"], rec.values[rate_key_], task_->unit());
      if (!int8_.empty()) spdlog::info("{}", int8_.summary());
    }
    interval_ = Running{};
    interval_start_ = Clock::now();
  }

  // The evaluation after an epoch: the record, the log line and the plateau schedule.
  void evaluate_epoch(int64_t epoch) {
    const Running train = over_ranks(epoch_);
    const std::string train_text = stats_text(train);
    bar_->finish(train_text);
    last_eval_ = task_->evaluate_epoch(*model_);
    result_.last_eval = last_eval_;
    state_.epoch = epoch + 1;
    state_.batch = 0;
    // The epoch's train average (as the summary line shows it) goes into its evaluation record.
    const double n = static_cast<double>(train.n), none = std::numeric_limits<double>::quiet_NaN();
    std::map<std::string, double> train_values = {
        {"train_loss", train.n > 0 ? train.mean_loss() : none},
        {"train_top1", train.n > 0 ? 100.0 * static_cast<double>(train.correct) / n : none},
        {"wall_s", wall_s()}};
    if (lm_) train_values["train_ppl"] = std::exp(train_values["train_loss"]);
    if (metrics_)
      record_eval(*metrics_, tb_.get(), last_eval_, state_.step, static_cast<double>(epoch + 1), device_, train_values);
    spdlog::info("epoch {}/{}: train {}, {}{}", epoch + 1, epochs_, train_text, describe_eval(last_eval_),
                 memory_text(device_));
    if (plateau_ && plateau_->observe(last_eval_.loss))
      spdlog::info("{} loss {:.4f} is no better than the best, {:.4f}: lr x {} -> {:.4g}", last_eval_.split,
                   last_eval_.loss, plateau_->state().best, recipe_.real("schedule.gamma"),
                   optimizer_->initial_lr(0) * schedule_->factor(static_cast<double>(epoch + 1)));
  }

  // ---- checkpoints

  // best.safetensors when the epoch improved; last.safetensors every checkpoint.every_epochs (0:
  // none of these), at the end and before a stop.
  void save_epoch_checkpoints(int64_t epoch) {
    if (task_->improves(last_eval_, state_)) save("best.safetensors");
    const int64_t every = recipe_.integer("checkpoint.every_epochs");  // >= 0: the recipe checked it
    if ((every > 0 && (epoch + 1) % every == 0) || epoch + 1 == epochs_ || stop_after_epoch_) save("last.safetensors");
    if (metrics_) metrics_->write_curves();
  }

  void write_checkpoint(const std::string& name) {
    NamedTensors task_tensors;
    Metadata task_metadata;
    task_->save_state(task_tensors, task_metadata);  // on every rank: a task may gather its state from all
    const Running sums = over_ranks(epoch_);         // likewise: every rank's share of the epoch so far
    if (!writer_) return;                            // rank 0 writes the run's checkpoints
    // After an epoch's evaluation (batch 0) the next epoch starts from zero.
    state_.epoch_sums = state_.batch > 0 ? static_cast<const EpochSums&>(sums) : EpochSums{};
    state_.rng_seed = default_generator().seed();
    state_.rng_offset = default_generator().offset();
    if (plateau_) state_.plateau = plateau_->state();
    save_checkpoint(run_dir_ + "/" + name, model_->state_dict(), optimizer_->state_dict(), state_,
                    recipe_.resolved_yaml(), int8_.state_dict(), task_tensors, task_metadata);
    if (name == "last.safetensors") last_on_disk_ = state_.step;
    point_at_run();
  }

  // <checkpoint.dir>/latest -> this run, once it has a checkpoint to evaluate or resume.
  void point_at_run() {
    if (latest_points_here_) return;
    point_latest_at(run_dir_);
    latest_points_here_ = true;
  }

  // A checkpoint that cannot be written (a full disk, a folder made read-only) leaves the previous
  // one under its name (core/serialization.h). checkpoint.on_save_error: stop ends the run with an
  // error saying so; continue warns, trains on and writes again at the next save. A file whose
  // newest save failed is "unwritten" until a later save of it succeeds. `required`: a save the run
  // cannot go on without (the one a stop by signal or max_steps ends with), an error whatever
  // on_save_error says.
  void save(const std::string& name, bool required = false) {
    try {
      write_checkpoint(name);
    } catch (const Error& e) {
      ++save_failures_;
      if (required || on_save_error_ == "stop") {
        if (metrics_) metrics_->write_curves();
        OCTET_FAIL("train: cannot write the checkpoint at step ", state_.step, ": ", e.what(), "; ",
                   required ? "stopped" : "stopped (checkpoint.on_save_error: stop)", "; ", on_disk_text(),
                   ". Make room or fix the folder, then continue with `octet train --resume ", run_dir_, "`",
                   required ? "" : ", or set checkpoint.on_save_error: continue to train on through failed saves");
      }
      unwritten_[name] = e.what();
      spdlog::warn(
          "cannot write the checkpoint at step {}: {}; training goes on (checkpoint.on_save_error: "
          "continue) and writes {} again at the next save; {} ({} failed saves so far)",
          state_.step, e.what(), name, on_disk_text(), save_failures_);
      return;
    }
    if (unwritten_.erase(name) > 0) spdlog::info("{}/{} written again after failed saves", run_dir_, name);
  }

  std::string on_disk_text() const {
    const std::string last = run_dir_ + "/last.safetensors";
    if (last_on_disk_ >= 0) return last + " (step " + std::to_string(last_on_disk_) + ") is intact";
    return fs::exists(last) ? "the previous " + last + " is intact" : "no last.safetensors was written yet";
  }

  // ---- the end

  // Stopped by a signal or train.max_steps: last.safetensors holds the position (state.epoch and
  // state.batch) to resume from.
  TrainResult stop(bool saved) {
    // Every rank takes part in a save (the epoch's sums and a task's state are gathered from all),
    // while only rank 0 knows of a failed one.
    std::vector<double> save_now{!saved || unwritten_.count("last.safetensors") ? 1.0 : 0.0};
    sum_over_ranks(save_now, group_);
    if (save_now[0] > 0) save("last.safetensors", true);
    if (metrics_) metrics_->write_curves();
    bar_->end_line();
    std::string why = "by train.max_steps " + std::to_string(max_steps_);
    if (stop_signal_ > 0)
      why = std::string("by ") + signal_name(stop_signal_);
    else if (!(max_steps_ > 0 && state_.step >= max_steps_))
      why = "on request";  // the caller's flag alone
    spdlog::info(
        "stopped at step {} (epoch {}, batch {} done) {}; checkpoint {}/last.safetensors; continue with "
        "`octet train --resume {}`",
        state_.step, state_.batch == 0 ? state_.epoch : state_.epoch + 1, state_.batch == 0 ? nb_ : state_.batch, why,
        run_dir_, run_dir_);
    result_.stopped = true;
    result_.stop_signal = stop_signal_;
    result_.steps = state_.step;
    return result_;
  }

  // The run is complete: an error if its newest checkpoints are only in memory; a language model's
  // test split with the weights of its best epoch, as PyTorch's word_language_model example does.
  TrainResult finish() {
    if (!unwritten_.empty()) {
      std::string files;
      for (const auto& [name, why] : unwritten_) files += "; " + run_dir_ + "/" + name + ": " + why;
      OCTET_FAIL("train: finished at step ", state_.step, " but its newest checkpoints could not be written (",
                 save_failures_, " failed saves, checkpoint.on_save_error: continue)", files, "; ", on_disk_text());
    }
    result_.steps = state_.step;
    result_.final_test = result_.last_eval;
    if (lm_) {
      // Rank 0 reads the best weights (its run folder) and hands them to the other ranks.
      const std::string best = run_dir_ + "/best.safetensors";
      std::vector<double> have_best{writer_ && fs::exists(best) ? 1.0 : 0.0};
      sum_over_ranks(have_best, group_);
      if (have_best[0] > 0) {
        if (writer_) load_model_from(*model_, load_checkpoint(best).model, best, "this run's model");
        if (group_) broadcast_weights(*model_, *group_);
      }
      result_.final_test = task_->evaluate_all(*model_).back();
      if (metrics_) {
        record_eval(*metrics_, tb_.get(), result_.final_test, state_.step, static_cast<double>(epochs_), device_,
                    {{"wall_s", wall_s()}});
        metrics_->write_curves();
      }
      spdlog::info("{} (the checkpoint of the best validation loss)", describe_eval(result_.final_test));
    }
    spdlog::info("done: {} steps in {}{}; checkpoints and curves in {}", state_.step, format_duration(wall_s()),
                 best_text(), run_dir_);
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

  // Several processes: each INT8 layer's gradient cosine distance d_c becomes its mean over the
  // ranks, so DCLR gives every rank the same learning-rate factors (and the weights stay equal).
  void average_int8_distances() {
    if (!group_) return;
    std::vector<double> d;
    for (const auto& l : int8_.layers()) d.push_back(l.layer->stats.cos_distance);
    sum_over_ranks(d, group_);
    for (size_t i = 0; i < d.size(); ++i)
      int8_.layers()[i].layer->stats.cos_distance = d[i] / static_cast<double>(group_->size());
  }

  // Every rank must train the same resolved recipe: a hash of it is compared across the ranks.
  // The first key that differs is named (one more comparison per key, only when they differ).
  void check_same_recipe_everywhere() const {
    const int differing = group_->first_rank_differing(recipe_.resolved_yaml());
    if (differing < 0) return;
    std::string key;
    for (const SchemaEntry& e : recipe_schema()) {
      if (group_->first_rank_differing(recipe_.value_yaml(e.key)) < 0) continue;
      key = e.key;
      break;
    }
    OCTET_FAIL("train: rank ", differing, "'s recipe differs from rank 0's (after its overrides)",
               key.empty() ? ""
                           : " at " + key + " (this rank, " + std::to_string(group_->rank()) + ", has " +
                                 recipe_.value_yaml(key) + ")",
               ": every process of the job must get the same recipe and overrides");
  }

  // A stop asked for (a signal, or the caller's flag) on any rank stops every rank after this step;
  // stop_signal_ is then the signal that asked for it (the lowest number, if ranks got several).
  bool agreed_stop() {
    const bool mine = opts_.stop && opts_.stop->load();
    const int sig = mine && opts_.stop_signal ? opts_.stop_signal->load() : 0;
    std::vector<double> v{mine ? 1.0 : 0.0};
    sum_over_ranks(v, group_);
    if (v[0] == 0) return false;
    constexpr int kSignals = 65;  // 1..64 on Linux
    std::vector<double> asked(kSignals, 0.0);
    if (sig > 0 && sig < kSignals) asked[static_cast<size_t>(sig)] = 1;
    sum_over_ranks(asked, group_);  // every rank takes part: each saw v[0] > 0
    for (int s = 1; s < kSignals && stop_signal_ == 0; ++s)
      if (asked[static_cast<size_t>(s)] > 0) stop_signal_ = s;
    return true;
  }

  // The statistics of every rank's shard together (r itself with one process).
  Running over_ranks(const Running& r) const {
    if (!group_) return r;
    std::vector<double> v{r.loss, static_cast<double>(r.n), static_cast<double>(r.correct),
                          static_cast<double>(r.skipped)};
    sum_over_ranks(v, group_);
    Running g;
    g.loss = v[0], g.n = static_cast<int64_t>(v[1]), g.correct = static_cast<int64_t>(v[2]);
    g.skipped = static_cast<int64_t>(v[3]);
    return g;
  }

  // Loss (and perplexity) or accuracy, as the progress bar and the log show them.
  std::string stats_text(const Running& r) const {
    if (r.n == 0) return "no loss (every step skipped)";  // train.on_nonfinite: skip
    char buf[96];
    if (lm_)
      std::snprintf(buf, sizeof(buf), "loss %.4f ppl %.2f", r.mean_loss(), std::exp(r.mean_loss()));
    else
      std::snprintf(buf, sizeof(buf), "loss %.4f acc %.2f%%", r.mean_loss(),
                    100.0 * static_cast<double>(r.correct) / std::max<double>(1, static_cast<double>(r.n)));
    return std::string(buf);
  }

  const TrainOptions& opts_;
  Recipe recipe_;
  Checkpoint ckpt_;
  TrainState state_;
  std::string run_dir_;
  std::string resumed_from_;  // the checkpoint file a resumed run continues
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
  std::vector<Tensor> params_, buffers_;
  // Several processes (null/true with one).
  dist::ProcessGroup* group_ = nullptr;
  std::unique_ptr<DropoutShardGuard> dropout_shard_;
  bool writer_ = true;
  std::shared_ptr<DistributedDataParallel> ddp_;
  double comm_wait_s_ = 0;
  // The recipe's policies.
  int64_t epochs_ = 0, nb_ = 0, log_every_ = 1, max_steps_ = 0;
  double clip_ = 0;
  std::string on_nonfinite_, on_save_error_, rate_key_;
  bool read_every_step_ = true;
  // Outputs.
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<TensorBoardWriter> tb_;
  std::unique_ptr<ProgressBar> bar_;
  // Progress.
  BatchStatsQueue step_stats_;
  Running interval_, epoch_;
  EpochSums resumed_epoch_;  // the checkpoint's sums for the epoch a resumed run continues
  Clock::time_point interval_start_;
  Clock::time_point session_start_;
  double wall_before_ = 0;  // the wall time of the sessions before a resume
  EvalResult last_eval_;
  bool stop_after_epoch_ = false;
  int64_t skipped_steps_ = 0, save_failures_ = 0;
  int64_t last_on_disk_ = -1;                     // the step of last.safetensors on disk, where known
  bool latest_points_here_ = false;               // point_at_run() has run
  int stop_signal_ = 0;                           // the signal that stopped the run (agreed_stop())
  std::map<std::string, std::string> unwritten_;  // file name -> why its newest save failed
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
