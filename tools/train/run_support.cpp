// The trainer's helpers (tools/train/run_support.h).
#include "tools/train/run_support.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/cuda.h"
#include "core/parallel.h"
#include "optim/clip.h"

namespace octet::train {

namespace fs = std::filesystem;

// A new run folder: checkpoint.dir/<run name>, numbered -2, -3, ... if that name is taken. Each
// name is claimed by creating it (mkdir fails on an existing folder), so two runs started at once
// never share one.
std::string new_run_dir(const Recipe& r) {
  std::string name = r.text("log.run_name");
  if (name.empty()) name = fs::path(r.source()).stem().string();
  if (name.empty()) name = "run";
  const fs::path base = fs::path(r.text("checkpoint.dir")) / name;
  std::error_code ec;
  fs::create_directories(base.parent_path().empty() ? fs::path(".") : base.parent_path(), ec);
  for (int i = 1; !ec; ++i) {
    const fs::path dir = i == 1 ? base : fs::path(base.string() + "-" + std::to_string(i));
    if (fs::create_directory(dir, ec)) return dir.string();
    if (ec == std::errc::file_exists) ec.clear();  // a file of that name: taken too
  }
  OCTET_FAIL("train: cannot create a run folder under ", base.parent_path().string(), ": ", ec.message(),
             " (set checkpoint.dir to a writable folder)");
}

// The device a recipe's train.device (or `octet eval --device`) names, checked before anything is
// built: cuda needs the CUDA backend in this build and a GPU on this machine.
Device usable_device(const std::string& text, const std::string& what) {
  Device d;
  try {
    d = Device::parse(text);
  } catch (const Error&) {
    OCTET_USAGE_FAIL(what, ": '", text, "' is not a device (expected cpu, cuda or cuda:N)");
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

void use_threads(int64_t threads, const std::string& what) {
  const int cores = usable_cores();
  if (threads > cores)
    spdlog::warn(
        "{} is {}, more than the {} cores this process may use: the CPU kernels will run slower than with "
        "{}",
        what, threads, cores, cores);
  set_num_threads(static_cast<int>(threads));
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
  // Every line reaches the file as it is logged (a few per log.every_steps): `tail -f train.log`
  // follows the run, and a killed run keeps its log. Unflushed, a 3-epoch run's train.log stayed
  // empty until the end.
  spdlog::default_logger()->flush_on(spdlog::level::info);
}

namespace {

bool is_file_log(const spdlog::sink_ptr& s) { return dynamic_cast<spdlog::sinks::basic_file_sink_mt*>(s.get()); }

}  // namespace

void drop_file_logs() {
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove_if(sinks.begin(), sinks.end(), is_file_log), sinks.end());
}

void log_error_to_files(const std::string& message) {
  std::vector<spdlog::sink_ptr> files;
  for (const spdlog::sink_ptr& s : spdlog::default_logger()->sinks())
    if (is_file_log(s)) files.push_back(s);
  if (files.empty()) return;
  spdlog::logger to_files(spdlog::default_logger()->name(), files.begin(), files.end());
  to_files.error("{}", message);
  to_files.flush();
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
  fs::path dir = fs::is_directory(resume) ? fs::path(resume) : fs::path(resume).parent_path();
  if (dir.empty()) dir = ".";  // a bare file name: the current folder
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);  // runs/latest: the run folder it points at
  if (ec) return dir.string();
  if (dir.is_absolute()) return real.string();
  const fs::path rel = fs::relative(real, ec);
  return ec || rel.empty() ? real.string() : rel.string();
}

bool is_run_folder(const std::string& dir) { return fs::is_regular_file(fs::path(dir) / "recipe.yaml"); }

namespace {

// "  missing keys: a, b, c, ..." with its first names only, when it lists many (a model that is
// not the checkpoint's misses all of its hundreds).
std::string shortened_list(const std::string& line) {
  constexpr size_t kMaxNames = 8;
  const size_t colon = line.find(": ");
  if (colon == std::string::npos) return line;
  size_t names = 1, cut = std::string::npos;
  for (size_t comma = line.find(", ", colon + 2); comma != std::string::npos; comma = line.find(", ", comma + 2)) {
    if (names == kMaxNames) cut = comma;
    ++names;
  }
  if (cut == std::string::npos) return line;
  return line.substr(0, cut) + ", ... (" + std::to_string(names) + " in all)";
}

}  // namespace

void load_from(const std::function<void()>& load, const std::string& path, const std::string& what) {
  try {
    load();
  } catch (const Error& e) {
    // "Mlp::load_state_dict: 3 error(s):\n  shape mismatch ...\n  ...": the problems, not the class.
    const std::string text = e.what();
    std::vector<std::string> lines;
    for (size_t at = 0, end; at < text.size(); at = end + 1) {
      end = std::min(text.find('\n', at), text.size());
      if (at > 0) lines.push_back(text.substr(at, end - at));
    }
    if (lines.empty()) {  // one line: what follows "Class::method: "
      const size_t colon = text.find(": ");
      OCTET_FAIL(path, ": does not fit ", what, ": ", colon == std::string::npos ? text : text.substr(colon + 2));
    }
    constexpr size_t kMaxLines = 12;
    std::string shown;
    for (size_t i = 0; i < std::min(lines.size(), kMaxLines); ++i) shown += "\n" + shortened_list(lines[i]);
    if (lines.size() > kMaxLines) shown += "\n  ... and " + std::to_string(lines.size() - kMaxLines) + " more";
    OCTET_FAIL(path, ": does not fit ", what, " (", lines.size(), " problem", lines.size() == 1 ? "" : "s",
               "):", shown);
  }
}

void load_model_from(Module& model, const NamedTensors& sd, const std::string& path, const std::string& what) {
  load_from([&] { model.load_state_dict(sd); }, path, what);
}

// An evaluation's record in metrics.jsonl (split "test" or "valid") and TensorBoard.
void record_eval(MetricsLog& metrics, TensorBoardWriter* tb, const EvalResult& ev, int64_t step, double epoch,
                 Device device, const std::map<std::string, double>& extra) {
  MetricRecord rec{
      ev.split,
      {{"step", static_cast<double>(step)}, {"epoch", epoch}, {"loss", ev.loss}, {"top1", ev.top1}, {"top5", ev.top5}}};
  if (ev.tokens) rec.values["ppl"] = ev.perplexity();
  rec.values.insert(extra.begin(), extra.end());
  add_memory_stats(device, rec.values);
  metrics.record(rec);
  if (!tb) return;
  for (const char* k : {"loss", "top1", "top5", "ppl"})
    if (rec.values.count(k)) tb->add_scalar(ev.split + "/" + k, static_cast<float>(rec.values[k]), step);
  tb->flush();
}

// What went non-finite at step `step` (epoch and batch 0-based): the loss, and which parameters'
// gradients. Backward runs from the loss towards the input, so the last parameter in the model's
// order (the forward order) with a non-finite gradient is the one nearest to where it began.
// The norms are the optimizer's (grad_norms): with sharded state, over every rank's ranges.
std::string nonfinite_text(const Module& model, const Optimizer& optimizer, const Tensor& loss, int64_t step,
                           int64_t epoch, int64_t batch) {
  std::set<std::string> nonfinite;
  const auto norms = grad_norms(optimizer);
  for (const auto& [name, norm] : norms)
    if (!std::isfinite(norm)) nonfinite.insert(name);
  std::string bad_last;
  const auto bad = static_cast<int64_t>(nonfinite.size()), total = static_cast<int64_t>(norms.size());
  for (const auto& [name, p] : model.named_parameters())
    if (nonfinite.count(name)) bad_last = name;
  std::string text = fmt::format("step {} (epoch {}, batch {}): loss {}", step, epoch + 1, batch + 1, loss.item());
  if (bad == 0) return text + ", every gradient finite";
  return text +
         fmt::format(", non-finite gradients in {} of {} parameters, nearest the loss: {}", bad, total, bad_last);
}

FusionReport fuse_for_task(Module& model, const Task& task) { return fuse(model, task.example_input()); }

void log_fusion(const FusionReport& fusion) {
  if (!fusion.groups.empty()) spdlog::info("fused: {}", fusion.describe());
}

void log_int8_training(const Int8Run& int8) {
  if (int8.empty()) return;
  std::string names;
  for (const auto& l : int8.layers()) names += (names.empty() ? "" : ", ") + l.name;
  const quant::Int8Config& c = int8.layers()[0].layer->config;
  spdlog::info("INT8 training of {} layers ({}); DSGC {} (every {} steps), stochastic rounding {}, DCLR {}",
               int8.layers().size(), names, c.dsgc_ ? "on" : "off", c.clip_update_period_,
               c.stochastic_rounding_ ? "on" : "off", c.dclr_ ? "on" : "off");
}

void log_optimizer(const Optimizer& optimizer, const std::string& name, int64_t num_parameters) {
  // The optimizer's memory: bytes of state per parameter (8 for 32-bit Adam, about 2 for 8-bit).
  // Sharded (train.shard_optimizer): this process's share.
  const double bytes = static_cast<double>(optimizer.state_bytes());
  const int64_t four = optimizer.num_4bit_params();
  spdlog::info("optimizer {}: {:.3f} MB of state{}, {:.3f} bytes per parameter ({} tensors with 8-bit state{})", name,
               bytes / 1e6, optimizer.sharded() ? " on this process (sharded)" : "",
               bytes / std::max<double>(1, static_cast<double>(num_parameters)), optimizer.num_8bit_params(),
               four > 0 ? fmt::format(", {} with 4-bit", four) : std::string());
  // What each optimizer.param_groups entry took (group i + 1; the first match wins), to check its globs by.
  for (size_t g = 1; g < optimizer.num_groups(); ++g) {
    constexpr size_t kShown = 6;
    const NamedTensors& params = optimizer.params(g);
    std::string names;
    for (size_t i = 0; i < params.size() && i < kShown; ++i) names += (i ? ", " : "") + params[i].first;
    if (params.size() > kShown) names += ", ...";
    spdlog::info("optimizer.param_groups[{}]: {} tensors, lr {:.4g} (before the schedule), state_bits {}: {}", g - 1,
                 params.size(), optimizer.initial_lr(g), optimizer.state_options(params.front().first).state_bits_,
                 names);
  }
}

}  // namespace octet::train
