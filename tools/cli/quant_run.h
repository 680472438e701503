// Quantized inference from the command line (quant/precision.h, layers/quantized.h):
//   octet eval CKPT --pbatch w=4,a=16 | --pbatch PLAN.yaml | --int8   (evaluate_quantized)
//   octet export CKPT --pbatch ... | --int8 -o OUT.safetensors        (export_quantized)
// A plan (tools/cli/quant_plan.h) maps module names (as in named_modules()) to a precision; `default:`
// covers every other quantizable layer but the model's final output layer.
// An export holds what inference needs: the checkpoint's model without the float weight matrices of
// its converted layers (biases and float layers stay), their preprocessed weights and assignment,
// written atomically; `octet eval OUT.safetensors` runs it without preprocessing. Other bits need
// the float weights: eval with a plan other than the export's own is an error that says to export
// again from the checkpoint (as export and sweep of an export are).
//   auto r = evaluate_quantized("runs/latest", "", 2, "cpu", cli_plan("w=4,a=16", false));
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "quant/precision.h"
#include "tools/cli/quant_plan.h"
#include "tools/train/task.h"

namespace octet::cli {

struct QuantEvalResult {
  std::vector<train::EvalResult> splits;      // as evaluate_checkpoint_splits
  std::vector<quant::ConvertedLayer> layers;  // every quantizable layer and its precision (empty: a float model)
};
// evaluate_checkpoint_splits with the model converted by `plan` (nullopt: as the file has it, i.e.
// an export's stored layers, or float). On an export, `plan` must give what the export holds.
// `overrides` as open_checkpoint_model's.
QuantEvalResult evaluate_quantized(const std::string& path, const std::string& data_root, int64_t threads,
                                   const std::string& device, const std::optional<quant::PrecisionPlan>& plan,
                                   const std::vector<std::string>& overrides = {});

// Writes `out`: the checkpoint `path` (model, task state and recipe; the optimizer state and the
// converted layers' float weights are left out) with the model converted by `plan` and its
// preprocessed weights. Returns the layers.
std::vector<quant::ConvertedLayer> export_quantized(const std::string& path, const quant::PrecisionPlan& plan,
                                                    const std::string& out, int64_t threads);

}  // namespace octet::cli
