// Opening a checkpoint or an export for `octet eval`, `generate`, `export` and `sweep`
// (trainer.h's CheckpointModel): the recipe it holds rebuilds the model, its weights load, and an
// export's quantized layers come back from their stored data, without the float weights it leaves
// out (quantized_float_weights).
//   CheckpointModel m = open_checkpoint_model("runs/latest", 2);   // best.safetensors, on the CPU
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "core/parallel.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "tools/train/builders.h"
#include "tools/train/lm_task.h"
#include "tools/train/run_support.h"
#include "tools/train/trainer.h"

namespace octet::train {

std::vector<std::string> quantized_float_weights(const Module& model) {
  std::vector<std::string> out;
  for (const auto& [name, m] : model.named_modules()) {
    const std::string prefix = name.empty() ? "" : name + ".";
    if (auto* lin = dynamic_cast<const Linear*>(m.get()); lin && lin->inference()) {
      out.push_back(prefix + "weight");
    } else if (auto* lstm = dynamic_cast<const LSTM*>(m.get()); lstm && lstm->inference()) {
      for (int64_t l = 0; l < lstm->num_layers_; ++l) {
        out.push_back(prefix + "weight_ih_l" + std::to_string(l));
        out.push_back(prefix + "weight_hh_l" + std::to_string(l));
      }
    }
  }
  return out;
}

namespace {

// The overrides of `m.recipe` leave the keys that shape the checkpoint's weights as they are.
void check_weights_kept(const CheckpointModel& m, const std::string& command) {
  std::vector<std::string> keys = {"quant.int8_conv", "quant.int8_linear", "quant.keep_first_last_float"};
  for (const std::string& k : keys_fixed_on_resume())
    if (k.rfind("model.", 0) == 0) keys.push_back(k);
  const Recipe stored = parse_stored_recipe(m.checkpoint.recipe_yaml, m.path + " (recipe)");
  const std::string key = first_changed(stored, m.recipe, keys);
  OCTET_USAGE_CHECK(key.empty(), command, " ", m.path, ": ", key,
                    " cannot be overridden (the checkpoint's weights are for ", key, ": ", stored.value_yaml(key),
                    ", the override asks for ", m.recipe.value_yaml(key),
                    "); keys that do not shape the weights can, e.g. data.limit_test=0 or train.eval_batch_size=64");
}

// An export's model: its tensors (without the float weights of its quantized layers; an export
// from before that holds them too), then its quantized layers from their stored data. Any other
// tensor missing or left over is an error, as a strict load_state_dict's.
void load_export(CheckpointModel& m) {
  std::set<std::string> own, given;
  for (const auto& [name, t] : m.model->state_dict()) own.insert(name);
  for (const auto& [name, t] : m.checkpoint.model) {
    OCTET_CHECK(own.count(name), m.path, ": unexpected model tensor '", name, "' (the model is model.name ",
                m.recipe.text("model.name"), ")");
    given.insert(name);
  }
  load_from([&] { m.model->load_state_dict(m.checkpoint.model, /*strict=*/false); }, m.path,
            "the model its recipe builds (model.name " + m.recipe.text("model.name") + ")");  // shapes and dtypes
  m.quant_layers = quant::load_quant_state(*m.model, m.checkpoint.quant, m.checkpoint.quant_assignment, m.path);
  const std::vector<std::string> left_out = quantized_float_weights(*m.model);
  for (const std::string& name : own)
    OCTET_CHECK(given.count(name) || std::find(left_out.begin(), left_out.end(), name) != left_out.end(), m.path,
                ": the export lacks model tensor '", name, "' (only its quantized layers' float weights are left out)");
}

}  // namespace

CheckpointModel open_checkpoint_model(const std::string& path_in, int64_t threads, const std::string& device_text,
                                      const std::string& command, const std::vector<std::string>& overrides) {
  CheckpointModel m;
  m.path = checkpoint_path(path_in);
  m.checkpoint = load_checkpoint(m.path);
  const bool quantizes = command == "export" || command.rfind("sweep", 0) == 0;  // sweep, sweep --search
  OCTET_CHECK(m.checkpoint.quant_assignment.empty() || !quantizes, command, ": ", m.path,
              " is an export (octet export): it holds its quantized layers' data, not the float weights to quantize "
              "again; run `octet ",
              command, "` on the checkpoint it was exported from");
  m.recipe = parse_stored_recipe(m.checkpoint.recipe_yaml, m.path + " (recipe)", overrides);
  if (!overrides.empty()) check_weights_kept(m, command);
  if (!device_text.empty()) {
    m.device = usable_device(device_text, command + " --device");
  } else {
    try {  // the recipe's training device when this machine can use it, else the CPU
      m.device = usable_device(m.recipe.text("train.device"), "recipe train.device");
    } catch (const Error& e) {
      spdlog::info("running on the cpu instead: {}", e.what());
    }
  }
  use_threads(threads, command + " --threads");
  const int64_t vocab = is_language_model(m.recipe) ? checkpoint_vocabulary(m.checkpoint).size() : 0;
  try {  // the stored recipe's model: one that cannot be built is a corrupt checkpoint, not a usage error
    m.model = build_model_from(m.recipe, vocab);
    build_int8(m.recipe, *m.model);  // an INT8-trained model runs through its INT8 layers
  } catch (const UsageError& e) {
    OCTET_FAIL(m.path, ": ", e.what());
  }
  if (m.checkpoint.quant_assignment.empty())
    load_model_from(*m.model, m.checkpoint.model, m.path,
                    "the model its recipe builds (model.name " + m.recipe.text("model.name") + ")");
  else
    load_export(m);  // its quantized layers, not preprocessed again
  use_device(m.device, m.recipe.boolean("train.allow_tf32"));
  m.model->to(m.device);
  return m;
}

std::vector<EvalResult> evaluate_checkpoint_splits(const std::string& path, const std::string& data_root,
                                                   int64_t threads, const std::string& device,
                                                   const std::vector<std::string>& overrides) {
  CheckpointModel m = open_checkpoint_model(path, threads, device, "eval", overrides);
  std::unique_ptr<Task> task = make_task(m.recipe, m.device, false, &m.checkpoint, data_root);
  log_fusion(fuse_for_task(*m.model, *task));
  spdlog::info("evaluating {} on {}: {}", m.path, describe(m.device), task->describe());
  return task->evaluate_all(*m.model);
}

EvalResult evaluate_checkpoint(const std::string& path, const std::string& data_root, int64_t threads,
                               const std::string& device) {
  return evaluate_checkpoint_splits(path, data_root, threads, device).back();
}

}  // namespace octet::train
