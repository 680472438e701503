#include "tools/trainer.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "core/cuda.h"
#include "core/octet.h"
#include "optim/clip.h"
#include "tools/batch_stats.h"
#include "tools/builders.h"
#include "tools/checkpoint.h"
#include "tools/int8_run.h"
#include "tools/lm_task.h"
#include "tools/metrics.h"
#include "tools/progress.h"
#include "tools/tensorboard.h"

namespace octet::tools {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// A new run folder: checkpoint.dir/<run name>, numbered -2, -3, ... if that name is taken.
std::string new_run_dir(const Recipe& r) {
  std::string name = r.text("log.run_name");
  if (name.empty()) name = fs::path(r.source()).stem().string();
  if (name.empty()) name = "run";
  fs::path base = fs::path(r.text("checkpoint.dir")) / name;
  fs::path dir = base;
  for (int i = 2; fs::exists(dir); ++i) dir = base.string() + "-" + std::to_string(i);
  std::error_code ec;
  fs::create_directories(dir, ec);
  OCTET_CHECK(!ec, "train: cannot create run folder ", dir.string(), ": ", ec.message(),
              " (set checkpoint.dir to a writable folder)");
  return dir.string();
}

// The device a recipe's train.device (or `octet eval --device`) names, checked before anything is
// built: cuda needs the CUDA backend in this build and a GPU on this machine.
Device usable_device(const std::string& text, const std::string& what) {
  Device d;
  try {
    d = Device::parse(text);
  } catch (const Error&) {
    OCTET_FAIL(what, ": '", text, "' is not a device (expected cpu, cuda or cuda:N)");
  }
  if (d.is_cpu()) return d;
  OCTET_CHECK(cuda_compiled(), what, ": '", text, "' needs the CUDA backend, which this build does not have ",
              "(configure with -DOCTET_CUDA=ON), or use cpu");
  OCTET_CHECK(cuda::is_available(), what, ": '", text, "' needs a GPU, but no CUDA device is available ",
              "(no GPU or no driver found on this machine); use cpu");
  OCTET_CHECK(d.index < cuda_device_count(), what, ": '", text, "' does not exist (this machine has ",
              cuda_device_count(), " CUDA device(s): cuda:0 to cuda:", cuda_device_count() - 1, ")");
  return d;
}

// Makes `d` the device of this thread's work and sets TF32 as the recipe says (it is process-wide).
void use_device(Device d, bool allow_tf32) {
  cuda::set_allow_tf32(allow_tf32);
  if (d.is_cuda()) cuda::set_device(d.index);
}

std::string describe(Device d) {
  if (d.is_cpu()) return "cpu";
  return d.str() + " (" + cuda::device_name(d.index) + ", driver CUDA " + cuda::driver_version() + ", cuDNN " +
         cuda::cudnn_version() + ", TF32 " + (cuda::allow_tf32() ? "allowed" : "off") + ")";
}

// Memory of the caching device allocator, for logs and metrics.jsonl (MiB).
void add_memory_stats(Device d, std::map<std::string, double>& values) {
  if (!d.is_cuda()) return;
  cuda::MemoryStats m = cuda::memory_stats(d.index);
  constexpr double kMiB = 1024.0 * 1024.0;
  values["cuda_allocated_mib"] = static_cast<double>(m.allocated) / kMiB;
  values["cuda_peak_allocated_mib"] = static_cast<double>(m.peak_allocated) / kMiB;
  values["cuda_cached_mib"] = static_cast<double>(m.cached) / kMiB;
}

std::string memory_text(Device d) {
  if (!d.is_cuda()) return "";
  std::map<std::string, double> v;
  add_memory_stats(d, v);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "; %s memory: %.0f MiB allocated, %.0f MiB peak, %.0f MiB cached", d.str().c_str(),
                v["cuda_allocated_mib"], v["cuda_peak_allocated_mib"], v["cuda_cached_mib"]);
  return buf;
}

void add_file_log(const std::string& path) {
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
  spdlog::default_logger()->sinks().push_back(sink);
}

void drop_file_logs() {
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove_if(sinks.begin(), sinks.end(),
                             [](const auto& s) { return dynamic_cast<spdlog::sinks::basic_file_sink_mt*>(s.get()); }),
              sinks.end());
}

// <checkpoint.dir>/latest -> the run folder, replaced atomically, so `octet eval runs/latest` works.
void point_latest_at(const std::string& run_dir) {
  fs::path dir(run_dir);
  fs::path link = dir.parent_path() / "latest", tmp = dir.parent_path() / ".latest.tmp";
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_directory_symlink(dir.filename(), tmp, ec);
  if (!ec) fs::rename(tmp, link, ec);
  if (ec) spdlog::warn("could not point {} at {}: {}", link.string(), run_dir, ec.message());
}

std::string run_dir_of(const std::string& resume) {
  return fs::is_directory(resume) ? resume : fs::path(resume).parent_path().string();
}

// An evaluation's record in metrics.jsonl (split "test" or "valid") and TensorBoard.
void record_eval(MetricsLog& metrics, TensorBoardWriter* tb, const EvalResult& ev, int64_t step, double epoch,
                 Device device) {
  MetricRecord rec{
      ev.split,
      {{"step", static_cast<double>(step)}, {"epoch", epoch}, {"loss", ev.loss}, {"top1", ev.top1}, {"top5", ev.top5}}};
  if (ev.tokens) rec.values["ppl"] = ev.perplexity();
  add_memory_stats(device, rec.values);
  metrics.record(rec);
  if (!tb) return;
  for (const char* k : {"loss", "top1", "top5", "ppl"})
    if (rec.values.count(k)) tb->add_scalar(ev.split + "/" + k, static_cast<float>(rec.values[k]), step);
  tb->flush();
}


// clip_grad_norm's max_norm that never scales: the call only measures the norm.
constexpr double kNoClip = std::numeric_limits<double>::infinity();

// What went non-finite at step `step` (epoch and batch 0-based): the loss, and which parameters'
// gradients. Backward runs from the loss towards the input, so the last parameter in the model's
// order (the forward order) with a non-finite gradient is the one nearest to where it began.
std::string nonfinite_text(const Module& model, const Tensor& loss, int64_t step, int64_t epoch, int64_t batch) {
  std::string bad_last;
  int64_t bad = 0, total = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    if (!p.grad().defined()) continue;
    ++total;
    if (!std::isfinite(clip_grad_norm({p}, kNoClip))) ++bad, bad_last = name;
  }
  std::string text = fmt::format("step {} (epoch {}, batch {}): loss {}", step, epoch + 1, batch + 1, loss.item());
  if (bad == 0) return text + ", every gradient finite";
  return text + fmt::format(", non-finite gradients in {} of {} parameters, nearest the loss: {}", bad, total, bad_last);
}

}  // namespace

TrainResult train(const Recipe& recipe_in, const TrainOptions& opts) {
  // ---- where we start: a new run, or a checkpoint's recipe and position
  Recipe recipe = recipe_in;
  Checkpoint ckpt;
  TrainState state;
  std::string run_dir;
  bool resuming = !opts.resume.empty();
  if (resuming) {
    std::string path = fs::is_directory(opts.resume) ? opts.resume + "/last.safetensors" : opts.resume;
    ckpt = load_checkpoint(path);
    recipe = parse_stored_recipe(ckpt.recipe_yaml, path + " (recipe)", opts.overrides);
    state = ckpt.state;
    run_dir = run_dir_of(path);
  }
  const Device device = usable_device(recipe.text("train.device"), "recipe train.device");
  set_num_threads(static_cast<int>(recipe.integer("train.threads")));
  const uint64_t seed = static_cast<uint64_t>(recipe.integer("train.seed"));
  manual_seed(seed);
  const int64_t epochs = recipe.integer("train.epochs");
  OCTET_CHECK(epochs >= 1, "recipe train.epochs: expected >= 1, got ", epochs);

  // The data (and a language model's vocabulary, which sizes the model) come first. The model is
  // initialized on the CPU (the same weights for every device), then moved, before the optimizer
  // creates its state next to the parameters. Loading a checkpoint copies host tensors into device
  // ones.
  std::unique_ptr<Task> task = make_task(recipe, device, true, resuming ? &ckpt : nullptr);
  const bool lm = task->vocab_size() > 0;
  auto model = build_model_from(recipe, task->vocab_size());
  Int8Run int8(build_int8(recipe, *model));
  use_device(device, recipe.boolean("train.allow_tf32"));
  model->to(device);
  auto optimizer = build_optimizer(recipe, model->named_parameters());
  std::shared_ptr<PlateauSchedule> plateau;
  auto schedule = build_schedule(recipe, &plateau);
  bool dropped_int8_stats = false;
  if (resuming) {
    model->load_state_dict(ckpt.model);
    optimizer->load_state_dict(ckpt.optimizer);
    default_generator().set_state(state.rng_seed, state.rng_offset);
    if (plateau) plateau->set_state(state.plateau);
    task->load_state(ckpt);
    // The INT8 layers continue their clip schedule and rounding draws where they were.
    if (!int8.empty()) {
      try {
        int8.load_state_dict(ckpt.int8);
      } catch (const Error& e) {
        OCTET_FAIL(ckpt.path, ": ", e.what());
      }
    }
    dropped_int8_stats = int8.empty() && !ckpt.int8.empty();
  }
  ckpt = Checkpoint();                           // the tensors now live in the model and optimizer
  if (!resuming) run_dir = new_run_dir(recipe);  // only once everything above was valid

  add_file_log(run_dir + "/train.log");
  point_latest_at(run_dir);
  write_file_atomic(run_dir + "/recipe.yaml", recipe.resolved_yaml());
  MetricsLog metrics(run_dir, resuming);
  std::unique_ptr<TensorBoardWriter> tb;
  if (recipe.boolean("log.tensorboard")) tb = std::make_unique<TensorBoardWriter>(run_dir + "/tensorboard");
  spdlog::info("{} run {} ({}): model {} with {} parameters, {}, on {}", resuming ? "resuming" : "starting", run_dir,
               recipe.source(), recipe.text("model.name"), model->num_parameters(), task->describe(), describe(device));
  if (!int8.empty()) {
    std::string names;
    for (const auto& l : int8.layers()) names += (names.empty() ? "" : ", ") + l.name;
    const quant::Int8Config& c = int8.layers()[0].layer->config;
    spdlog::info("INT8 training of {} convolutions ({}); DSGC {} (every {} steps), stochastic rounding {}, DCLR {}",
                 int8.layers().size(), names, c.dsgc ? "on" : "off", c.clip_update_period,
                 c.stochastic_rounding ? "on" : "off", c.dclr ? "on" : "off");
  }
  if (dropped_int8_stats)
    spdlog::warn("the checkpoint was trained with INT8 layers; this run (quant.int8_conv: false) continues in float");

  const int64_t log_every = std::max<int64_t>(1, recipe.integer("log.every_steps"));
  const int64_t max_steps = recipe.integer("train.max_steps");
  const double clip = recipe.real("train.clip_grad_norm");
  const std::string on_nonfinite = recipe.text("train.on_nonfinite");
  OCTET_CHECK(on_nonfinite == "stop" || on_nonfinite == "skip",
              "recipe train.on_nonfinite: expected stop or skip, got '", on_nonfinite, "'");
  int64_t skipped_steps = 0;
  const int64_t nb = task->batches_per_epoch();
  OCTET_CHECK(nb >= 1, "train: the training data makes no batch");
  const std::string rate_key = lm ? "tokens_per_s" : "samples_per_s";
  std::vector<Tensor> params = model->parameters();
  std::vector<Tensor> buffers = model->buffers();
  {
    // The optimizer's memory: bytes of state per parameter (8 for 32-bit Adam, about 2 for 8-bit).
    double per_param = static_cast<double>(optimizer->state_bytes()) / std::max<double>(1, model->num_parameters());
    spdlog::info("optimizer {}: {:.3f} MB of state, {:.3f} bytes per parameter ({} tensors with 8-bit state)",
                 recipe.text("optimizer.name"), static_cast<double>(optimizer->state_bytes()) / 1e6, per_param,
                 optimizer->num_8bit_params());
  }
  TrainResult result;
  result.run_dir = run_dir;

  // A checkpoint that cannot be written (a full disk, a folder made read-only) leaves the previous
  // one under its name (core/serialization.h). checkpoint.on_save_error: stop ends the run with
  // an error saying so; continue warns, trains on and writes again at the next save. A file whose
  // newest save failed is "unwritten" until a later save of it succeeds; a run that ends with one
  // is an error, as its newest weights are only in memory.
  const std::string on_save_error = recipe.text("checkpoint.on_save_error");
  OCTET_CHECK(on_save_error == "stop" || on_save_error == "continue",
              "recipe checkpoint.on_save_error: expected stop or continue, got '", on_save_error, "'");
  int64_t save_failures = 0;
  std::map<std::string, std::string> unwritten;  // file name -> why its newest save failed
  // The step of last.safetensors on disk, where known.
  int64_t last_on_disk =
      resuming && (fs::is_directory(opts.resume) || fs::path(opts.resume).filename() == "last.safetensors")
          ? state.step
          : -1;
  auto on_disk_text = [&] {
    const std::string last = run_dir + "/last.safetensors";
    if (last_on_disk >= 0) return last + " (step " + std::to_string(last_on_disk) + ") is intact";
    return fs::exists(last) ? "the previous " + last + " is intact" : "no last.safetensors was written yet";
  };
  auto write = [&](const std::string& name) {
    state.rng_seed = default_generator().seed();
    state.rng_offset = default_generator().offset();
    if (plateau) state.plateau = plateau->state();
    NamedTensors task_tensors;
    Metadata task_metadata;
    task->save_state(task_tensors, task_metadata);
    save_checkpoint(run_dir + "/" + name, model->state_dict(), optimizer->state_dict(), state, recipe.resolved_yaml(),
                    int8.state_dict(), task_tensors, task_metadata);
    if (name == "last.safetensors") last_on_disk = state.step;
  };
  // `required`: a save the run cannot go on without (the one a stop by signal or max_steps ends
  // with), an error whatever on_save_error says.
  auto save = [&](const std::string& name, bool required = false) {
    try {
      write(name);
    } catch (const Error& e) {
      ++save_failures;
      if (required || on_save_error == "stop") {
        metrics.write_curves();
        drop_file_logs();
        OCTET_FAIL("train: cannot write the checkpoint at step ", state.step, ": ", e.what(), "; ",
                   required ? "stopped" : "stopped (checkpoint.on_save_error: stop)", "; ", on_disk_text(),
                   ". Make room or fix the folder, then continue with `octet train --resume ", run_dir, "`",
                   required ? "" : ", or set checkpoint.on_save_error: continue to train on through failed saves");
      }
      unwritten[name] = e.what();
      spdlog::warn("cannot write the checkpoint at step {}: {}; training goes on (checkpoint.on_save_error: "
                   "continue) and writes {} again at the next save; {} ({} failed saves so far)",
                   state.step, e.what(), name, on_disk_text(), save_failures);
      return;
    }
    if (unwritten.erase(name) > 0) spdlog::info("{}/{} written again after failed saves", run_dir, name);
  };
  // Loss (and perplexity) or accuracy, as the progress bar and the log show them.
  auto stats_text = [&](double loss, int64_t correct, int64_t n) {
    char buf[96];
    if (lm)
      std::snprintf(buf, sizeof(buf), "loss %.4f ppl %.2f", loss, std::exp(loss));
    else
      std::snprintf(buf, sizeof(buf), "loss %.4f acc %.2f%%", loss,
                    100.0 * static_cast<double>(correct) / std::max<double>(1, static_cast<double>(n)));
    return std::string(buf);
  };

  // Stopped by a signal or train.max_steps: last.safetensors holds the position (state.epoch and
  // state.batch) to resume from.
  bool stop_after_epoch = false;
  auto stop = [&](bool saved) {
    if (!saved || unwritten.count("last.safetensors")) save("last.safetensors", true);
    metrics.write_curves();
    spdlog::info(
        "stopped at step {} (epoch {}, batch {} done); checkpoint {}/last.safetensors; continue with "
        "`octet train --resume {}`",
        state.step, state.batch == 0 ? state.epoch : state.epoch + 1, state.batch == 0 ? nb : state.batch, run_dir,
        run_dir);
    result.stopped = true;
    result.steps = state.step;
    drop_file_logs();
    return result;
  };

  // Loss and accuracy per step. The CPU reads them every step; a GPU keeps them on the device until
  // the next metric record (log.every_steps), so the host waits for it only there, and the
  // progress bar shows the numbers as of that record.
  const bool read_every_step = device.is_cpu();
  BatchStatsQueue step_stats;

  for (int64_t epoch = state.epoch; epoch < epochs; ++epoch) {
    model->train();
    task->start_epoch(*model, epoch, state.batch);
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs), nb,
                    recipe.boolean("log.progress"), task->units_per_step(), task->unit());
    double interval_loss = 0, epoch_loss = 0;
    int64_t interval_n = 0, interval_correct = 0, epoch_n = 0, epoch_correct = 0;
    auto interval_start = Clock::now();
    for (int64_t b = state.batch; b < nb; ++b) {
      double epoch_pos = static_cast<double>(epoch) + static_cast<double>(b) / static_cast<double>(nb);
      apply_schedule(*optimizer, *schedule, epoch_pos);
      // A skipped step must not leave its forward pass's buffer updates (batch-norm running
      // statistics of non-finite activations) behind: they are restored from this copy.
      std::vector<Tensor> buffers_before;
      if (on_nonfinite == "skip")
        for (const Tensor& t : buffers) buffers_before.push_back(t.clone());
      StepOutput out = task->step(*model, b);
      optimizer->zero_grad();
      out.loss.backward();
      // The global gradient norm, accumulated in double, is finite exactly when every gradient
      // is (clip_grad_norm leaves non-finite gradients unscaled).
      const double grad_norm = clip_grad_norm(params, clip > 0 ? clip : kNoClip);
      if (!int8.empty()) {
        int8.after_backward(state.step + 1);
        int8.apply_dclr(*optimizer);  // each INT8 layer's lr factor from this backward pass's d_c
      }
      // The loss is read here only where it is read every step anyway (the CPU): on a GPU a
      // non-finite loss shows in its gradients.
      if (std::isfinite(grad_norm) && (!read_every_step || std::isfinite(out.loss.item()))) {
        optimizer->step();
      } else {
        const std::string what = nonfinite_text(*model, out.loss, state.step + 1, epoch, b);
        if (on_nonfinite == "stop") {
          metrics.write_curves();
          drop_file_logs();
          OCTET_FAIL("train: ", what, "; stopped before updating the weights (train.on_nonfinite: stop), so ",
                     run_dir, "/last.safetensors is as it was. Lower the learning rate, clip gradients "
                     "(train.clip_grad_norm) or set train.on_nonfinite: skip");
        }
        ++skipped_steps;
        spdlog::warn("{}; step skipped (train.on_nonfinite: skip; {} skipped so far)", what, skipped_steps);
        optimizer->zero_grad();
        NoGradGuard no_grad;
        for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(buffers_before[i]);
        task->skip_step();
      }
      ++state.step;
      state.batch = b + 1;

      step_stats.push(out.loss, out.logits, out.labels);
      bool stop_now = (opts.stop && opts.stop->load()) || (max_steps > 0 && state.step >= max_steps);
      bool record_now = state.step % log_every == 0 || b + 1 == nb || stop_now;
      if (read_every_step || record_now) {
        for (const BatchStats& st : step_stats.drain()) {
          double n = static_cast<double>(st.n);
          interval_loss += st.loss * n, epoch_loss += st.loss * n;
          interval_n += st.n, epoch_n += st.n, interval_correct += st.top1, epoch_correct += st.top1;
        }
      }
      char lr_text[32];
      std::snprintf(lr_text, sizeof(lr_text), "lr %.4g", optimizer->lr(0));
      bar.update(b + 1, epoch_n > 0 ? stats_text(epoch_loss / static_cast<double>(epoch_n), epoch_correct, epoch_n) +
                                          " " + lr_text
                                    : std::string(lr_text));
      if (record_now) {
        double secs = std::chrono::duration<double>(Clock::now() - interval_start).count();
        const double n = static_cast<double>(interval_n);
        MetricRecord rec{"train",
                         {{"step", static_cast<double>(state.step)},
                          {"epoch", static_cast<double>(epoch) + static_cast<double>(b + 1) / static_cast<double>(nb)},
                          {"loss", interval_loss / n},
                          {"top1", 100.0 * static_cast<double>(interval_correct) / n},
                          {"lr", optimizer->lr(0)},
                          {rate_key, secs > 0 ? n / secs : 0.0}}};
        if (lm) rec.values["ppl"] = std::exp(rec.values["loss"]);
        if (skipped_steps > 0) rec.values["skipped_steps"] = static_cast<double>(skipped_steps);
        if (save_failures > 0) rec.values["save_failures"] = static_cast<double>(save_failures);
        add_memory_stats(device, rec.values);
        metrics.record(rec);
        if (!int8.empty()) metrics.record(int8.record(state.step, rec.values["epoch"]));
        if (tb) {
          for (const std::string& k : {std::string("loss"), std::string("top1"), std::string("lr"), rate_key})
            tb->add_scalar("train/" + k, static_cast<float>(rec.values[k]), state.step);
          if (!int8.empty()) int8.add_scalars(*tb, state.step);
          tb->flush();
        }
        if (!ProgressBar::terminal() || !recipe.boolean("log.progress")) {
          spdlog::info("epoch {} step {}: {} lr {:.4g} {:.0f} {}/s", epoch + 1, state.step,
                       stats_text(rec.values["loss"], interval_correct, interval_n), rec.values["lr"],
                       rec.values[rate_key], task->unit());
          if (!int8.empty()) spdlog::info("{}", int8.summary());
        }
        interval_loss = 0, interval_n = 0, interval_correct = 0;
        interval_start = Clock::now();
      }
      // A stop at the last batch still evaluates the epoch (its best checkpoint, the plateau
      // schedule), as an uninterrupted run does, and stops after that.
      if (stop_now && b + 1 < nb) {
        state.epoch = epoch;
        return stop(false);
      }
      stop_after_epoch = stop_now;
    }
    const std::string train_text = stats_text(epoch_loss / std::max<double>(1, epoch_n), epoch_correct, epoch_n);
    bar.finish(train_text);

    EvalResult ev = task->evaluate_epoch(*model);
    result.last_eval = ev;
    state.epoch = epoch + 1;
    state.batch = 0;
    record_eval(metrics, tb.get(), ev, state.step, static_cast<double>(epoch + 1), device);
    spdlog::info("epoch {}/{}: train {}, {}{}", epoch + 1, epochs, train_text, describe_eval(ev), memory_text(device));
    if (plateau && plateau->observe(ev.loss))
      spdlog::info("{} loss {:.4f} is no better than the best, {:.4f}: lr x {} -> {:.4g}", ev.split, ev.loss,
                   plateau->state().best, recipe.real("schedule.gamma"),
                   optimizer->initial_lr(0) * schedule->factor(static_cast<double>(epoch + 1)));
    if (task->improves(ev, state)) save("best.safetensors");
    int64_t every = std::max<int64_t>(1, recipe.integer("checkpoint.every_epochs"));
    if ((epoch + 1) % every == 0 || epoch + 1 == epochs || stop_after_epoch) save("last.safetensors");
    metrics.write_curves();
    if (stop_after_epoch && epoch + 1 < epochs) return stop(true);
  }
  if (!unwritten.empty()) {
    std::string files;
    for (const auto& [name, why] : unwritten) files += "; " + run_dir + "/" + name + ": " + why;
    drop_file_logs();
    OCTET_FAIL("train: finished at step ", state.step, " but its newest checkpoints could not be written (",
               save_failures, " failed saves, checkpoint.on_save_error: continue)", files, "; ", on_disk_text());
  }
  result.steps = state.step;
  result.final_test = result.last_eval;
  if (lm) {
    // As PyTorch's word_language_model example: the test split, with the weights of the best epoch.
    const std::string best = run_dir + "/best.safetensors";
    if (fs::exists(best)) model->load_state_dict(load_checkpoint(best).model);
    result.final_test = task->evaluate_all(*model).back();
    record_eval(metrics, tb.get(), result.final_test, state.step, static_cast<double>(epochs), device);
    metrics.write_curves();
    spdlog::info("{} (the checkpoint of the best validation loss)", describe_eval(result.final_test));
  }
  spdlog::info("done: {} steps; checkpoints and curves in {}", state.step, run_dir);
  drop_file_logs();
  return result;
}

CheckpointModel open_checkpoint_model(const std::string& path_in, int64_t threads, const std::string& device_text,
                                      const std::string& command) {
  // A run folder means its best checkpoint (or the last one, before any epoch finished).
  CheckpointModel m;
  m.path = path_in;
  if (fs::is_directory(m.path))
    m.path = fs::exists(m.path + "/best.safetensors") ? m.path + "/best.safetensors" : m.path + "/last.safetensors";
  m.checkpoint = load_checkpoint(m.path);
  m.recipe = parse_stored_recipe(m.checkpoint.recipe_yaml, m.path + " (recipe)");
  if (!device_text.empty()) {
    m.device = usable_device(device_text, command + " --device");
  } else {
    try {  // the recipe's training device when this machine can use it, else the CPU
      m.device = usable_device(m.recipe.text("train.device"), "recipe train.device");
    } catch (const Error& e) {
      spdlog::info("running on the cpu instead: {}", e.what());
    }
  }
  set_num_threads(static_cast<int>(threads));
  const int64_t vocab = is_language_model(m.recipe) ? checkpoint_vocabulary(m.checkpoint).size() : 0;
  m.model = build_model_from(m.recipe, vocab);
  build_int8(m.recipe, *m.model);  // an INT8-trained model runs through its INT8 layers
  m.model->load_state_dict(m.checkpoint.model);
  if (!m.checkpoint.quant_assignment.empty())  // an export: its quantized layers, not preprocessed again
    m.quant_layers = quant::load_quant_state(*m.model, m.checkpoint.quant, m.checkpoint.quant_assignment, m.path);
  use_device(m.device, m.recipe.boolean("train.allow_tf32"));
  m.model->to(m.device);
  return m;
}

std::vector<EvalResult> evaluate_checkpoint_splits(const std::string& path, const std::string& data_root,
                                                   int64_t threads, const std::string& device) {
  CheckpointModel m = open_checkpoint_model(path, threads, device);
  std::unique_ptr<Task> task = make_task(m.recipe, m.device, false, &m.checkpoint, data_root);
  spdlog::info("evaluating {} on {}: {}", m.path, describe(m.device), task->describe());
  return task->evaluate_all(*m.model);
}

EvalResult evaluate_checkpoint(const std::string& path, const std::string& data_root, int64_t threads,
                               const std::string& device) {
  return evaluate_checkpoint_splits(path, data_root, threads, device).back();
}

}  // namespace octet::tools
