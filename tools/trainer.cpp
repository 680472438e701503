#include "tools/trainer.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/octet.h"
#include "data/loader.h"
#include "optim/clip.h"
#include "tools/builders.h"
#include "tools/checkpoint.h"
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

// Rank of the target among the logits of each row: top-k is correct when rank < k.
void count_topk(const Tensor& logits, const Tensor& labels, int64_t& top1, int64_t& top5) {
  Tensor l = logits.detach().to(DType::f32).contiguous();
  std::vector<float> v = l.to_vector<float>();
  std::vector<int64_t> y = labels.to_vector<int64_t>();
  int64_t c = l.size(1);
  for (size_t i = 0; i < y.size(); ++i) {
    const float* row = v.data() + i * c;
    float t = row[y[i]];
    int64_t rank = 0;
    for (int64_t j = 0; j < c; ++j) rank += row[j] > t;
    top1 += rank < 1;
    top5 += rank < 5;
  }
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
  loader.start_epoch(0);
  EvalResult r;
  double loss_sum = 0;
  int64_t top1 = 0, top5 = 0;
  while (auto batch = loader.next()) {
    Tensor logits = model(batch->inputs);
    loss_sum += cross_entropy(logits, batch->labels, CrossEntropyOptions().reduction(Reduction::sum)).item();
    count_topk(logits, batch->labels, top1, top5);
    r.examples += batch->labels.size(0);
  }
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
  OCTET_CHECK(recipe.text("train.device") == "cpu", "recipe train.device: '", recipe.text("train.device"),
              "' is not available in this build (only cpu)");
  set_num_threads(static_cast<int>(recipe.integer("train.threads")));
  const uint64_t seed = static_cast<uint64_t>(recipe.integer("train.seed"));
  manual_seed(seed);

  auto model = build_model_from(recipe);
  Datasets data = build_datasets(recipe, true);
  auto optimizer = build_optimizer(recipe, model->named_parameters());
  auto schedule = build_schedule(recipe);
  if (resuming) {
    model->load_state_dict(ckpt.model);
    optimizer->load_state_dict(ckpt.optimizer);
    default_generator().set_state(state.rng_seed, state.rng_offset);
  }
  ckpt = Checkpoint();                           // the tensors now live in the model and optimizer
  if (!resuming) run_dir = new_run_dir(recipe);  // only once everything above was valid

  add_file_log(run_dir + "/train.log");
  point_latest_at(run_dir);
  write_file_atomic(run_dir + "/recipe.yaml", recipe.resolved_yaml());
  MetricsLog metrics(run_dir, resuming);
  std::unique_ptr<TensorBoardWriter> tb;
  if (recipe.boolean("log.tensorboard")) tb = std::make_unique<TensorBoardWriter>(run_dir + "/tensorboard");
  spdlog::info("{} run {} ({}): model {} with {} parameters, {} training / {} test examples",
               resuming ? "resuming" : "starting", run_dir, recipe.source(), recipe.text("model.name"),
               model->num_parameters(), data.train->size(), data.test->size());

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
                    recipe.resolved_yaml());
  };

  for (int64_t epoch = state.epoch; epoch < epochs; ++epoch) {
    model->train();
    loader.start_epoch(epoch, state.batch);
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs), nb,
                    recipe.boolean("log.progress"), static_cast<double>(batch_size), "img");
    double interval_loss = 0, epoch_loss = 0;
    int64_t interval_n = 0, interval_correct = 0, epoch_n = 0, epoch_correct = 0, interval_steps = 0;
    auto interval_start = Clock::now();
    for (int64_t b = state.batch; b < nb; ++b) {
      std::optional<Batch> batch = loader.next();
      OCTET_CHECK(batch.has_value(), "train: the data loader ended early at batch ", b, " of ", nb);
      double epoch_pos = static_cast<double>(epoch) + static_cast<double>(b) / static_cast<double>(nb);
      apply_schedule(*optimizer, *schedule, epoch_pos);
      Tensor logits = (*model)(batch->inputs);
      Tensor loss = cross_entropy(logits, batch->labels, CrossEntropyOptions().label_smoothing(smoothing));
      optimizer->zero_grad();
      loss.backward();
      if (clip > 0) clip_grad_norm(params, clip);
      optimizer->step();
      ++state.step;
      state.batch = b + 1;

      int64_t n = batch->labels.size(0), top1 = 0, top5 = 0;
      count_topk(logits, batch->labels, top1, top5);
      double l = loss.item();
      interval_loss += l * static_cast<double>(n), epoch_loss += l * static_cast<double>(n);
      interval_n += n, epoch_n += n, interval_correct += top1, epoch_correct += top1, ++interval_steps;
      char stats[128];
      std::snprintf(stats, sizeof(stats), "loss %.4f acc %.2f%% lr %.4g", epoch_loss / static_cast<double>(epoch_n),
                    100.0 * static_cast<double>(epoch_correct) / static_cast<double>(epoch_n), optimizer->lr(0));
      bar.update(b + 1, stats);
      bool stop_now = (opts.stop && opts.stop->load()) || (max_steps > 0 && state.step >= max_steps);
      if (state.step % log_every == 0 || b + 1 == nb || stop_now) {
        double secs = std::chrono::duration<double>(Clock::now() - interval_start).count();
        MetricRecord rec{"train",
                         {{"step", static_cast<double>(state.step)},
                          {"epoch", static_cast<double>(epoch) + static_cast<double>(b + 1) / static_cast<double>(nb)},
                          {"loss", interval_loss / static_cast<double>(interval_n)},
                          {"top1", 100.0 * static_cast<double>(interval_correct) / static_cast<double>(interval_n)},
                          {"lr", optimizer->lr(0)},
                          {"samples_per_s", secs > 0 ? static_cast<double>(interval_n) / secs : 0.0}}};
        metrics.record(rec);
        if (tb) {
          for (const char* k : {"loss", "top1", "lr", "samples_per_s"})
            tb->add_scalar(std::string("train/") + k, static_cast<float>(rec.values[k]), state.step);
          tb->flush();
        }
        if (!ProgressBar::terminal() || !recipe.boolean("log.progress"))
          spdlog::info("epoch {} step {}: loss {:.4f} top-1 {:.2f}% lr {:.4g} {:.0f} img/s", epoch + 1, state.step,
                       rec.values["loss"], rec.values["top1"], rec.values["lr"], rec.values["samples_per_s"]);
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
    metrics.record({"test",
                    {{"step", static_cast<double>(state.step)},
                     {"epoch", static_cast<double>(epoch + 1)},
                     {"loss", ev.loss},
                     {"top1", ev.top1},
                     {"top5", ev.top5}}});
    if (tb) {
      tb->add_scalar("test/loss", static_cast<float>(ev.loss), state.step);
      tb->add_scalar("test/top1", static_cast<float>(ev.top1), state.step);
      tb->add_scalar("test/top5", static_cast<float>(ev.top5), state.step);
      tb->flush();
    }
    spdlog::info("epoch {}/{}: train loss {:.4f}, test loss {:.4f}, top-1 {:.2f}%, top-5 {:.2f}%", epoch + 1, epochs,
                 epoch_loss / std::max<double>(1, epoch_n), ev.loss, ev.top1, ev.top5);
    if (ev.top1 > state.best_top1) {
      state.best_top1 = ev.top1;
      state.rng_seed = default_generator().seed();
      state.rng_offset = default_generator().offset();
      save_checkpoint(run_dir + "/best.safetensors", model->state_dict(), optimizer->state_dict(), state,
                      recipe.resolved_yaml());
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

EvalResult evaluate_checkpoint(const std::string& path_in, const std::string& data_root, int64_t threads) {
  // A run folder means its best checkpoint (or the last one, before any epoch finished).
  std::string path = path_in;
  if (fs::is_directory(path))
    path = fs::exists(path + "/best.safetensors") ? path + "/best.safetensors" : path + "/last.safetensors";
  Checkpoint c = load_checkpoint(path);
  Recipe recipe = parse_recipe(c.recipe_yaml, path + " (recipe)");
  set_num_threads(static_cast<int>(threads));
  auto model = build_model_from(recipe);
  model->load_state_dict(c.model);
  Datasets data = build_datasets(recipe, false, data_root);
  return evaluate(*model, data.test, recipe.integer("train.eval_batch_size"), recipe.integer("data.workers"));
}

}  // namespace octet::tools
