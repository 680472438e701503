#include "tools/train/checkpoint.h"

#include <charconv>
#include <cstdio>
#include <filesystem>

namespace octet::train {

namespace {

const std::string kModel = "model.", kOptimizer = "optimizer.", kInt8 = "int8.", kTask = "task.", kQuant = "quant.";
const std::string kQuantAssignment = "quant.assignment";

std::string real_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

template <typename T>
T parse_number(const Metadata& md, const std::string& key, const std::string& path) {
  auto it = md.find(key);
  OCTET_CHECK(it != md.end(), path, ": checkpoint metadata lacks '", key, "'");
  const std::string& s = it->second;
  T v{};
  if constexpr (std::is_floating_point_v<T>) {
    char* end = nullptr;
    v = std::strtod(s.c_str(), &end);
    OCTET_CHECK(!s.empty() && end == s.c_str() + s.size(), path, ": checkpoint metadata '", key, "' is not a number: '",
                s, "'");
  } else {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    OCTET_CHECK(ec == std::errc() && p == s.data() + s.size(), path, ": checkpoint metadata '", key,
                "' is not an integer: '", s, "'");
  }
  return v;
}

// The file is an octet checkpoint of the format version this octet reads.
void check_format(const Metadata& md, const std::string& path) {
  const auto quoted = [&](const char* key) {
    const auto it = md.find(key);
    return it == md.end() ? std::string("missing") : "'" + it->second + "'";
  };
  const auto format = md.find("format");
  OCTET_CHECK(format != md.end() && format->second == kCheckpointFormat, path,
              ": not an octet checkpoint (metadata 'format' is ", quoted("format"), ", expected '", kCheckpointFormat,
              "' with 'format_version' ", kCheckpointFormatVersion, ")");
  const auto version = md.find("format_version");
  OCTET_CHECK(version != md.end() && version->second == kCheckpointFormatVersion, path, ": checkpoint format version ",
              quoted("format_version"), " (metadata 'format_version'); this octet reads format version ",
              kCheckpointFormatVersion);
}

}  // namespace

void save_checkpoint(const std::string& path, const NamedTensors& model, const NamedTensors& optimizer,
                     const TrainState& s, const std::string& recipe_yaml, const NamedTensors& int8,
                     const NamedTensors& task, const Metadata& task_metadata, const NamedTensors& quant,
                     const std::string& quant_assignment) {
  NamedTensors all;
  all.reserve(model.size() + optimizer.size() + int8.size() + task.size());
  for (const auto& [k, t] : model) all.emplace_back(kModel + k, t);
  for (const auto& [k, t] : optimizer) all.emplace_back(kOptimizer + k, t);
  for (const auto& [k, t] : int8) all.emplace_back(kInt8 + k, t);
  for (const auto& [k, t] : task) all.emplace_back(kTask + k, t);
  for (const auto& [k, t] : quant) all.emplace_back(kQuant + k, t);
  Metadata md = {{"format", kCheckpointFormat},
                 {"format_version", kCheckpointFormatVersion},
                 {"epoch", std::to_string(s.epoch)},
                 {"batch", std::to_string(s.batch)},
                 {"step", std::to_string(s.step)},
                 {"best_top1", real_text(s.best_top1)},
                 {"best_loss", real_text(s.best_loss)},
                 {"plateau_factor", real_text(s.plateau.factor)},
                 {"plateau_best", real_text(s.plateau.best)},
                 {"plateau_bad", std::to_string(s.plateau.bad)},
                 {"rng_seed", std::to_string(s.rng_seed)},
                 {"rng_offset", std::to_string(s.rng_offset)},
                 {"epoch_loss_sum", real_text(s.epoch_sums.loss)},
                 {"epoch_examples", std::to_string(s.epoch_sums.n)},
                 {"epoch_correct", std::to_string(s.epoch_sums.correct)},
                 {"epoch_skipped", std::to_string(s.epoch_sums.skipped)},
                 {"recipe", recipe_yaml}};
  for (const auto& [k, v] : task_metadata) md.emplace(kTask + k, v);
  if (!quant_assignment.empty()) md.emplace(kQuantAssignment, quant_assignment);
  save_safetensors(path, all, md);
}

Checkpoint load_checkpoint(const std::string& path) { return checkpoint_of(load_safetensors(path)); }

Checkpoint checkpoint_of(const SafetensorsFile& f) {
  const std::string& path = f.path;
  check_format(f.metadata, path);
  Checkpoint c;
  c.path = path;
  c.state.epoch = parse_number<int64_t>(f.metadata, "epoch", path);
  c.state.batch = parse_number<int64_t>(f.metadata, "batch", path);
  c.state.step = parse_number<int64_t>(f.metadata, "step", path);
  c.state.best_top1 = parse_number<double>(f.metadata, "best_top1", path);
  c.state.best_loss = parse_number<double>(f.metadata, "best_loss", path);
  c.state.plateau.factor = parse_number<double>(f.metadata, "plateau_factor", path);
  c.state.plateau.best = parse_number<double>(f.metadata, "plateau_best", path);
  c.state.plateau.bad = parse_number<int64_t>(f.metadata, "plateau_bad", path);
  c.state.rng_seed = parse_number<uint64_t>(f.metadata, "rng_seed", path);
  c.state.rng_offset = parse_number<uint64_t>(f.metadata, "rng_offset", path);
  c.state.epoch_sums.loss = parse_number<double>(f.metadata, "epoch_loss_sum", path);
  c.state.epoch_sums.n = parse_number<int64_t>(f.metadata, "epoch_examples", path);
  c.state.epoch_sums.correct = parse_number<int64_t>(f.metadata, "epoch_correct", path);
  c.state.epoch_sums.skipped = parse_number<int64_t>(f.metadata, "epoch_skipped", path);
  OCTET_CHECK(c.state.epoch >= 0 && c.state.batch >= 0 && c.state.step >= 0, path,
              ": checkpoint has a negative epoch, batch or step");
  const EpochSums& sums = c.state.epoch_sums;
  OCTET_CHECK(
      sums.n >= 0 && sums.correct >= 0 && sums.correct <= sums.n && sums.skipped >= 0, path,
      ": checkpoint metadata epoch_examples, epoch_correct, epoch_skipped must be counts (correct <= examples)");
  auto recipe = f.metadata.find("recipe");
  OCTET_CHECK(recipe != f.metadata.end(), path, ": checkpoint metadata lacks 'recipe'");
  c.recipe_yaml = recipe->second;
  for (const auto& [k, v] : f.metadata)
    if (k.rfind(kTask, 0) == 0) c.task_metadata.emplace(k.substr(kTask.size()), v);
  if (auto q = f.metadata.find(kQuantAssignment); q != f.metadata.end()) c.quant_assignment = q->second;
  for (auto& [k, t] : f.tensors) {
    if (k.rfind(kModel, 0) == 0)
      c.model.emplace_back(k.substr(kModel.size()), t);
    else if (k.rfind(kOptimizer, 0) == 0)
      c.optimizer.emplace_back(k.substr(kOptimizer.size()), t);
    else if (k.rfind(kInt8, 0) == 0)
      c.int8.emplace_back(k.substr(kInt8.size()), t);
    else if (k.rfind(kTask, 0) == 0)
      c.task.emplace_back(k.substr(kTask.size()), t);
    else if (k.rfind(kQuant, 0) == 0)
      c.quant.emplace_back(k.substr(kQuant.size()), t);
    else
      OCTET_FAIL(path, ": unexpected tensor '", k, "' (expected model.*, optimizer.*, int8.*, task.* or quant.*)");
  }
  OCTET_CHECK(c.quant.empty() || !c.quant_assignment.empty(), path,
              ": checkpoint has quantized layer data (quant.*) but no metadata 'quant.assignment'");
  return c;
}

std::string checkpoint_path(const std::string& run_or_checkpoint) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(run_or_checkpoint)) return run_or_checkpoint;
  const std::string best = run_or_checkpoint + "/best.safetensors";
  return fs::exists(best) ? best : run_or_checkpoint + "/last.safetensors";
}

}  // namespace octet::train
