#include "tools/trainer.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/cuda.h"
#include "core/octet.h"
#include "data/loader.h"
#include "data/prefetch.h"
#include "optim/clip.h"
#include "tools/batch_stats.h"
#include "tools/builders.h"
#include "tools/checkpoint.h"
#include "tools/int8_run.h"
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

Device module_device(const Module& m) {
  std::vector<Tensor> tensors = m.parameters();
  if (tensors.empty()) tensors = m.buffers();
  return tensors.empty() ? Device::cpu() : tensors[0].device();
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

}  // namespace

EvalResult evaluate(Module& model, const std::shared_ptr<Dataset>& data, int64_t batch_size, int64_t workers) {
  NoGradGuard ng;
  bool was_training = model.is_training();
  model.eval();
  DataLoader loader(data, DataLoaderOptions().batch_size(batch_size).shuffle(false).workers(workers));
  DevicePrefetcher batches(loader, module_device(model));
  batches.start_epoch(0);
  EvalResult r;
  double loss_sum = 0;
  int64_t top1 = 0, top5 = 0;
  BatchStatsQueue stats;
  auto take = [&] {
    for (const BatchStats& s : stats.drain()) loss_sum += s.loss, top1 += s.top1, top5 += s.top5, r.examples += s.n;
  };
  while (auto batch = batches.next()) {
    Tensor logits = model(batch->inputs);
    stats.push(cross_entropy(logits, batch->labels, CrossEntropyOptions().reduction(Reduction::sum)), logits,
               batch->labels);
    if (stats.pending() >= 256) take();  // bounds what a GPU keeps queued; the sums do not depend on it
  }
  take();
  model.train(was_training);
  if (r.examples > 0) {
    r.loss = loss_sum / static_cast<double>(r.examples);
    r.top1 = 100.0 * static_cast<double>(top1) / static_cast<double>(r.examples);
    r.top5 = 100.0 * static_cast<double>(top5) / static_cast<double>(r.examples);
  }
  return r;
}

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
    recipe = parse_recipe(ckpt.recipe_yaml, path + " (recipe)", opts.overrides);
    state = ckpt.state;
    run_dir = run_dir_of(path);
  }
  const Device device = usable_device(recipe.text("train.device"), "recipe train.device");
  set_num_threads(static_cast<int>(recipe.integer("train.threads")));
  const uint64_t seed = static_cast<uint64_t>(recipe.integer("train.seed"));
  manual_seed(seed);

  // The model is initialized on the CPU (the same weights for every device), then moved, before the
  // optimizer creates its state next to the parameters. Loading a checkpoint copies host tensors
  // into device ones.
  auto model = build_model_from(recipe);
  Int8Run int8(build_int8(recipe, *model));
  Datasets data = build_datasets(recipe, true);
  use_device(device, recipe.boolean("train.allow_tf32"));
  model->to(device);
  auto optimizer = build_optimizer(recipe, model->named_parameters());
  auto schedule = build_schedule(recipe);
  bool dropped_int8_stats = false;
  if (resuming) {
    model->load_state_dict(ckpt.model);
    optimizer->load_state_dict(ckpt.optimizer);
    default_generator().set_state(state.rng_seed, state.rng_offset);
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
  spdlog::info("{} run {} ({}): model {} with {} parameters, {} training / {} test examples, on {}",
               resuming ? "resuming" : "starting", run_dir, recipe.source(), recipe.text("model.name"),
               model->num_parameters(), data.train->size(), data.test->size(), describe(device));
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

  const int64_t epochs = recipe.integer("train.epochs"), batch_size = recipe.integer("train.batch_size");
  const int64_t log_every = std::max<int64_t>(1, recipe.integer("log.every_steps"));
  const int64_t max_steps = recipe.integer("train.max_steps");
  const double clip = recipe.real("train.clip_grad_norm"), smoothing = recipe.real("train.label_smoothing");
  OCTET_CHECK(epochs >= 1, "recipe train.epochs: expected >= 1, got ", epochs);
  OCTET_CHECK(batch_size >= 1, "recipe train.batch_size: expected >= 1, got ", batch_size);
  DataLoader loader(data.train, DataLoaderOptions()
                                    .batch_size(batch_size)
                                    .shuffle(true)
                                    .drop_last(true)
                                    .workers(recipe.integer("data.workers"))
                                    .seed(seed));
  // On a GPU the prefetcher copies batch b+1 to the device while step b computes.
  DevicePrefetcher batches(loader, device);
  const int64_t nb = loader.num_batches();
  OCTET_CHECK(nb >= 1, "train: ", data.train->size(), " training examples are fewer than one batch of ", batch_size);
  std::vector<Tensor> params = model->parameters();
  {
    // The optimizer's memory: bytes of state per parameter (8 for 32-bit Adam, about 2 for 8-bit).
    double per_param = static_cast<double>(optimizer->state_bytes()) / std::max<double>(1, model->num_parameters());
    spdlog::info("optimizer {}: {:.3f} MB of state, {:.3f} bytes per parameter ({} tensors with 8-bit state)",
                 recipe.text("optimizer.name"), static_cast<double>(optimizer->state_bytes()) / 1e6, per_param,
                 optimizer->num_8bit_params());
  }
  TrainResult result;
  result.run_dir = run_dir;

  auto save_last = [&]() {
    state.rng_seed = default_generator().seed();
    state.rng_offset = default_generator().offset();
    save_checkpoint(run_dir + "/last.safetensors", model->state_dict(), optimizer->state_dict(), state,
                    recipe.resolved_yaml(), int8.state_dict());
  };

  // Loss and accuracy per step. The CPU reads them every step; a GPU keeps them on the device until
  // the next metric record (log.every_steps), so the host waits for it only there, and the
  // progress bar shows the numbers as of that record.
  const bool read_every_step = device.is_cpu();
  BatchStatsQueue step_stats;

  for (int64_t epoch = state.epoch; epoch < epochs; ++epoch) {
    model->train();
    batches.start_epoch(epoch, state.batch);
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs), nb,
                    recipe.boolean("log.progress"), static_cast<double>(batch_size), "img");
    double interval_loss = 0, epoch_loss = 0;
    int64_t interval_n = 0, interval_correct = 0, epoch_n = 0, epoch_correct = 0, interval_steps = 0;
    auto interval_start = Clock::now();
    for (int64_t b = state.batch; b < nb; ++b) {
      std::optional<Batch> batch = batches.next();
      OCTET_CHECK(batch.has_value(), "train: the data loader ended early at batch ", b, " of ", nb);
      double epoch_pos = static_cast<double>(epoch) + static_cast<double>(b) / static_cast<double>(nb);
      apply_schedule(*optimizer, *schedule, epoch_pos);
      Tensor logits = (*model)(batch->inputs);
      Tensor loss = cross_entropy(logits, batch->labels, CrossEntropyOptions().label_smoothing(smoothing));
      optimizer->zero_grad();
      loss.backward();
      if (clip > 0) clip_grad_norm(params, clip);
      if (!int8.empty()) {
        int8.after_backward(state.step + 1);
        int8.apply_dclr(*optimizer);  // each INT8 layer's lr factor from this backward pass's d_c
      }
      optimizer->step();
      ++state.step;
      state.batch = b + 1;

      step_stats.push(loss, logits, batch->labels);
      bool stop_now = (opts.stop && opts.stop->load()) || (max_steps > 0 && state.step >= max_steps);
      bool record_now = state.step % log_every == 0 || b + 1 == nb || stop_now;
      if (read_every_step || record_now) {
        for (const BatchStats& s : step_stats.drain()) {
          double n = static_cast<double>(s.n);
          interval_loss += s.loss * n, epoch_loss += s.loss * n;
          interval_n += s.n, epoch_n += s.n, interval_correct += s.top1, epoch_correct += s.top1, ++interval_steps;
        }
      }
      char stats[128];
      if (epoch_n > 0)
        std::snprintf(stats, sizeof(stats), "loss %.4f acc %.2f%% lr %.4g", epoch_loss / static_cast<double>(epoch_n),
                      100.0 * static_cast<double>(epoch_correct) / static_cast<double>(epoch_n), optimizer->lr(0));
      else
        std::snprintf(stats, sizeof(stats), "lr %.4g", optimizer->lr(0));
      bar.update(b + 1, stats);
      if (record_now) {
        double secs = std::chrono::duration<double>(Clock::now() - interval_start).count();
        MetricRecord rec{"train",
                         {{"step", static_cast<double>(state.step)},
                          {"epoch", static_cast<double>(epoch) + static_cast<double>(b + 1) / static_cast<double>(nb)},
                          {"loss", interval_loss / static_cast<double>(interval_n)},
                          {"top1", 100.0 * static_cast<double>(interval_correct) / static_cast<double>(interval_n)},
                          {"lr", optimizer->lr(0)},
                          {"samples_per_s", secs > 0 ? static_cast<double>(interval_n) / secs : 0.0}}};
        add_memory_stats(device, rec.values);
        metrics.record(rec);
        if (!int8.empty()) metrics.record(int8.record(state.step, rec.values["epoch"]));
        if (tb) {
          for (const char* k : {"loss", "top1", "lr", "samples_per_s"})
            tb->add_scalar(std::string("train/") + k, static_cast<float>(rec.values[k]), state.step);
          if (!int8.empty()) int8.add_scalars(*tb, state.step);
          tb->flush();
        }
        if (!ProgressBar::terminal() || !recipe.boolean("log.progress")) {
          spdlog::info("epoch {} step {}: loss {:.4f} top-1 {:.2f}% lr {:.4g} {:.0f} img/s", epoch + 1, state.step,
                       rec.values["loss"], rec.values["top1"], rec.values["lr"], rec.values["samples_per_s"]);
          if (!int8.empty()) spdlog::info("{}", int8.summary());
        }
        interval_loss = 0, interval_n = 0, interval_correct = 0, interval_steps = 0;
        interval_start = Clock::now();
      }
      if (stop_now) {
        state.epoch = epoch;
        if (state.batch == nb) state.epoch = epoch + 1, state.batch = 0;
        save_last();
        metrics.write_curves();
        spdlog::info(
            "stopped at step {} (epoch {}, batch {}); checkpoint {}/last.safetensors; continue with "
            "`octet train --resume {}`",
            state.step, epoch + 1, b + 1, run_dir, run_dir);
        result.stopped = true;
        result.steps = state.step;
        drop_file_logs();
        return result;
      }
    }
    char stats[96];
    std::snprintf(stats, sizeof(stats), "loss %.4f acc %.2f%%", epoch_loss / std::max<double>(1, epoch_n),
                  100.0 * static_cast<double>(epoch_correct) / std::max<double>(1, epoch_n));
    bar.finish(stats);

    EvalResult ev =
        evaluate(*model, data.test, recipe.integer("train.eval_batch_size"), recipe.integer("data.workers"));
    result.last_eval = ev;
    state.epoch = epoch + 1;
    state.batch = 0;
    MetricRecord test_rec{"test",
                          {{"step", static_cast<double>(state.step)},
                           {"epoch", static_cast<double>(epoch + 1)},
                           {"loss", ev.loss},
                           {"top1", ev.top1},
                           {"top5", ev.top5}}};
    add_memory_stats(device, test_rec.values);
    metrics.record(test_rec);
    if (tb) {
      tb->add_scalar("test/loss", static_cast<float>(ev.loss), state.step);
      tb->add_scalar("test/top1", static_cast<float>(ev.top1), state.step);
      tb->add_scalar("test/top5", static_cast<float>(ev.top5), state.step);
      tb->flush();
    }
    spdlog::info("epoch {}/{}: train loss {:.4f}, test loss {:.4f}, top-1 {:.2f}%, top-5 {:.2f}%{}", epoch + 1, epochs,
                 epoch_loss / std::max<double>(1, epoch_n), ev.loss, ev.top1, ev.top5, memory_text(device));
    if (ev.top1 > state.best_top1) {
      state.best_top1 = ev.top1;
      state.rng_seed = default_generator().seed();
      state.rng_offset = default_generator().offset();
      save_checkpoint(run_dir + "/best.safetensors", model->state_dict(), optimizer->state_dict(), state,
                      recipe.resolved_yaml(), int8.state_dict());
    }
    int64_t every = std::max<int64_t>(1, recipe.integer("checkpoint.every_epochs"));
    if ((epoch + 1) % every == 0 || epoch + 1 == epochs) save_last();
    metrics.write_curves();
  }
  result.steps = state.step;
  spdlog::info("done: {} steps; checkpoints and curves in {}", state.step, run_dir);
  drop_file_logs();
  return result;
}

EvalResult evaluate_checkpoint(const std::string& path_in, const std::string& data_root, int64_t threads,
                               const std::string& device_text) {
  // A run folder means its best checkpoint (or the last one, before any epoch finished).
  std::string path = path_in;
  if (fs::is_directory(path))
    path = fs::exists(path + "/best.safetensors") ? path + "/best.safetensors" : path + "/last.safetensors";
  Checkpoint c = load_checkpoint(path);
  Recipe recipe = parse_recipe(c.recipe_yaml, path + " (recipe)");
  Device device = Device::cpu();
  if (!device_text.empty()) {
    device = usable_device(device_text, "eval --device");
  } else {
    try {  // the recipe's training device when this machine can use it, else the CPU
      device = usable_device(recipe.text("train.device"), "recipe train.device");
    } catch (const Error& e) {
      spdlog::info("evaluating on the cpu instead: {}", e.what());
    }
  }
  set_num_threads(static_cast<int>(threads));
  auto model = build_model_from(recipe);
  build_int8(recipe, *model);  // an INT8-trained model is evaluated through its INT8 layers
  model->load_state_dict(c.model);
  use_device(device, recipe.boolean("train.allow_tf32"));
  model->to(device);
  spdlog::info("evaluating {} on {}", path, describe(device));
  Datasets data = build_datasets(recipe, false, data_root);
  return evaluate(*model, data.test, recipe.integer("train.eval_batch_size"), recipe.integer("data.workers"));
}

}  // namespace octet::tools
