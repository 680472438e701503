// Fuzzes precision plan files (`octet eval|export|sweep --pbatch plan.yaml`, tools/cli/quant_plan.h):
// the YAML, the plan applied to a small LSTM language model (quant::convert_model: layer names, the
// default, PrecisionBatching bit widths, int8, float), one forward pass through the converted
// layers, and the model back to float for the next input.
#include "core/error.h"
#include "fuzz_util.h"
#include "quant/precision.h"
#include "quant_model.h"
#include "tools/cli/quant_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<octet::LstmLm> model = octet::fuzz::quant_model();
  static const octet::Tensor batch = octet::fuzz::quant_batch();
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const octet::quant::PrecisionPlan plan = octet::cli::precision_plan_from_yaml(text, "plan.yaml");
    (void)octet::quant::convert_model(*model, plan);
    octet::NoGradGuard no_grad;
    (void)model->forward(batch);
  } catch (const octet::Error&) {
  }
  octet::quant::reset_to_float(*model);
  return 0;
}
