#include "tools/cli/quant_run.h"

#include <spdlog/spdlog.h>

#include "tools/train/trainer.h"

namespace octet::cli {

// The trainer library is what every subcommand drives.
using namespace octet::train;

QuantEvalResult evaluate_quantized(const std::string& path, const std::string& data_root, int64_t threads,
                                   const std::string& device, const std::optional<quant::PrecisionPlan>& plan) {
  CheckpointModel m = open_checkpoint_model(path, threads, device);
  QuantEvalResult r;
  r.layers = m.quant_layers;
  if (plan) r.layers = quant::convert_model(*m.model, *plan);
  if (!r.layers.empty()) spdlog::info("quantized layers: {}", quant::describe_layers(r.layers));
  std::unique_ptr<Task> task = make_task(m.recipe, m.device, false, &m.checkpoint, data_root);
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
  const Checkpoint& c = m.checkpoint;
  save_checkpoint(out, c.model, {}, c.state, c.recipe_yaml, c.int8, c.task, c.task_metadata, quant_tensors, assignment);
  return layers;
}

}  // namespace octet::cli
