#include "tools/train/torch_weights.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/serialization.h"
#include "optim/optimizer.h"
#include "tools/train/checkpoint.h"

namespace octet::train {

namespace {

constexpr size_t kListed = 12;  // names an error lists before "... and N more"

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kListed; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kListed) out += ", ... and " + std::to_string(names.size() - kListed) + " more";
  return out;
}

bool ignored(const std::vector<std::string>& globs, const std::string& name) {
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) { return name_matches(g, name); });
}

std::vector<std::string> names_of(const NamedTensors& tensors) {
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors) names.push_back(name);
  return names;
}

bool is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }

}  // namespace

size_t export_torch_weights(const std::string& run_or_checkpoint, const std::string& out, DType dtype) {
  OCTET_USAGE_CHECK(dtype == DType::f32 || dtype == DType::bf16, "export --torch: --dtype is f32 or bf16, got ", dtype);
  const std::string path = checkpoint_path(run_or_checkpoint);
  const Checkpoint c = load_checkpoint(path);
  OCTET_CHECK(c.quant.empty(), path,
              ": is an export with quantized layers; --torch takes a training checkpoint (the run folder or its "
              "last/best.safetensors)");
  OCTET_CHECK(!c.model.empty(), path, ": holds no model tensors");
  NamedTensors model = c.model;
  for (auto& [name, t] : model)
    if (is_floating(t.dtype()) && t.dtype() != dtype) t = t.to(dtype);
  // safetensors.torch.save_file writes this metadata; its load_file does not need it.
  save_safetensors(out, model, {{"format", "pt"}});
  return c.model.size();
}

InitFromReport init_from_file(Module& model, const std::string& path, const InitFromOptions& options) {
  const SafetensorsFile file = load_safetensors(path);
  // An octet checkpoint: its model tensors, without the prefix.
  const auto format = file.metadata.find("format");
  const bool checkpoint = format != file.metadata.end() && format->second == kCheckpointFormat;
  const NamedTensors given = checkpoint ? checkpoint_of(file).model : file.tensors;
  const NamedTensors own = model.state_dict();
  std::map<std::string, Tensor> own_by_name(own.begin(), own.end());
  // A glob that matches no tensor, of the file or the model, is a mistake (as in param_groups).
  for (const std::string& glob : options.ignore) {
    const auto matches = [&](const auto& entry) { return name_matches(glob, entry.first); };
    OCTET_USAGE_CHECK(std::any_of(given.begin(), given.end(), matches) || std::any_of(own.begin(), own.end(), matches),
                      "recipe model.init_ignore: '", glob, "' matches no tensor of ", path,
                      " or of the model (its names: ", listed(names_of(own)), ")");
  }
  InitFromReport report;
  std::vector<std::string> unexpected, problems;
  NamedTensors load;
  std::set<std::string> present;
  for (const auto& entry : given) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    present.insert(name);
    if (ignored(options.ignore, name)) continue;
    auto it = own_by_name.find(name);
    if (it == own_by_name.end()) {
      (options.strict ? unexpected : report.unused).push_back(name);
      continue;
    }
    const Tensor& mine = it->second;
    if (t.shape() != mine.shape()) {
      problems.push_back(
          detail::str_cat("'", name, "' is ", t.shape(), " in the file, ", mine.shape(), " in the model"));
    } else if (t.dtype() != mine.dtype() && !(is_float(t.dtype()) && is_float(mine.dtype()))) {
      problems.push_back(
          detail::str_cat("'", name, "' is ", t.dtype(), " in the file, ", mine.dtype(), " in the model"));
    } else {
      load.emplace_back(name, t.dtype() == mine.dtype() ? t : t.to(mine.dtype()));
    }
  }
  std::vector<std::string> missing;
  for (const auto& entry : own) {
    const std::string& name = entry.first;
    if (present.count(name) && !ignored(options.ignore, name)) continue;
    if (!present.count(name) && options.strict && !ignored(options.ignore, name))
      missing.push_back(name);
    else
      report.ignored.push_back(name);
  }
  const std::string where = checkpoint ? " (the checkpoint's model tensors)" : "";
  if (!missing.empty())
    problems.push_back("the model's " + std::to_string(missing.size()) +
                       " tensor(s) not in the file: " + listed(missing));
  if (!unexpected.empty())
    problems.push_back(std::to_string(unexpected.size()) +
                       " file tensor(s) the model does not have: " + listed(unexpected));
  if (!problems.empty()) {
    std::string msg = path + where + " does not fit the model:";
    for (const auto& p : problems) msg += "\n  " + p;
    msg +=
        "\n  (model.init_ignore: [\"NAME_GLOB\", ...] leaves tensors as initialized, e.g. [\"classifier.*\"] or "
        "[\"fc.*\"] for a new number of classes; model.init_strict: false loads only the names both have)";
    OCTET_FAIL(msg);
  }
  model.load_state_dict(load, /*strict=*/false);
  report.loaded = load.size();
  return report;
}

}  // namespace octet::train
