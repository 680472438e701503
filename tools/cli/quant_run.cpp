#include "tools/cli/quant_run.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "tools/train/run_support.h"
#include "tools/train/trainer.h"

namespace octet::cli {

// The trainer library is what every subcommand drives.
using namespace octet::train;

namespace {

// The precision `plan` gives each quantizable layer of `model`, as convert_model would (a layer the
// plan names that the model lacks shows as "not in the model").
std::string planned_text(const Module& model, const quant::PrecisionPlan& plan) {
  std::vector<quant::ConvertedLayer> layers = quant::quantizable_layers(model);
  const std::string final_layer = quant::final_layer_name(model);
  for (auto& l : layers) {
    auto it = plan.layers.find(l.name);
    l.precision = it != plan.layers.end() ? it->second : l.name == final_layer ? std::nullopt : plan.default_spec;
  }
  std::string text = quant::describe_layers(layers);
  for (const auto& entry : plan.layers)  // not a structured binding: clang 14 cannot capture one
    if (std::none_of(layers.begin(), layers.end(), [&](const auto& l) { return l.name == entry.first; }))
      text += ", " + entry.first + ": not in the model";
  return text;
}

}  // namespace

QuantEvalResult evaluate_quantized(const std::string& path, const std::string& data_root, int64_t threads,
                                   const std::string& device, const std::optional<quant::PrecisionPlan>& plan,
                                   const std::vector<std::string>& overrides) {
  CheckpointModel m = open_checkpoint_model(path, threads, device, "eval", overrides);
  QuantEvalResult r;
  r.layers = m.quant_layers;
  if (plan && !m.quant_layers.empty()) {
    // An export holds its quantized layers' data alone: other bits would need the float weights.
    const std::string held = quant::describe_layers(m.quant_layers), asked = planned_text(*m.model, *plan);
    const std::string flag = plan->source == "--int8" ? plan->source : "--pbatch " + plan->source;
    OCTET_CHECK(asked == held, "eval: ", m.path, " is an export holding ", held, "; the plan ", plan->source,
                " asks for ", asked,
                ". An export keeps only the data of its quantized layers, not the float weights to quantize again: "
                "export again from the checkpoint (`octet export CHECKPOINT ",
                flag, " -o OUT`) or evaluate the checkpoint with it");
  } else if (plan) {
    r.layers = quant::convert_model(*m.model, *plan);
  }
  if (!r.layers.empty()) spdlog::info("quantized layers: {}", quant::describe_layers(r.layers));
  std::unique_ptr<Task> task = make_task(m.recipe, m.device, false, &m.checkpoint, data_root);
  log_fusion(fuse_for_task(*m.model, *task));
  spdlog::info("evaluating {} on {}: {}", m.path, m.device.str(), task->describe());
  r.splits = task->evaluate_all(*m.model);
  return r;
}

std::vector<quant::ConvertedLayer> export_quantized(const std::string& path, const quant::PrecisionPlan& plan,
                                                    const std::string& out, int64_t threads) {
  CheckpointModel m = open_checkpoint_model(path, threads, "cpu", "export");
  std::vector<quant::ConvertedLayer> layers = quant::convert_model(*m.model, plan);
  NamedTensors quant_tensors;
  std::string assignment;
  quant::save_quant_state(*m.model, quant_tensors, assignment);
  // What inference needs: the quantized layers' float weights are left out (their data is in
  // quant_tensors), so an export is smaller than its checkpoint.
  const std::vector<std::string> left_out = quantized_float_weights(*m.model);
  const Checkpoint& c = m.checkpoint;
  NamedTensors model;
  for (const auto& [name, t] : c.model)
    if (std::find(left_out.begin(), left_out.end(), name) == left_out.end()) model.emplace_back(name, t);
  save_checkpoint(out, model, {}, c.state, c.recipe_yaml, c.int8, c.task, c.task_metadata, quant_tensors, assignment);
  return layers;
}

}  // namespace octet::cli
