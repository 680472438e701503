// Fuzzes exports (`octet export`, read back by `octet eval`): the checkpoint reader, then
// quant::load_quant_state into a small LSTM language model (the assignment's lines, layer names and
// types, precisions, every stored tensor's dtype and shape, the 1-bit plane check), then one forward
// pass through the layers it accepted: stored data that passes the checks but would make a kernel
// read out of bounds shows here. The model goes back to float for the next input.
#include "core/error.h"
#include "fuzz_util.h"
#include "quant/precision.h"
#include "quant_model.h"
#include "tools/train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<octet::LstmLm> model = octet::fuzz::quant_model();
  static const octet::Tensor batch = octet::fuzz::quant_batch();
  static const std::string path = octet::fuzz::scratch_dir() + "/export.safetensors";
  octet::fuzz::write_bytes(path, data, size);
  try {
    const octet::train::Checkpoint c = octet::train::load_checkpoint(path);
    (void)octet::quant::load_quant_state(*model, c.quant, c.quant_assignment, path);
    octet::NoGradGuard no_grad;
    (void)model->forward(batch);
  } catch (const octet::Error&) {
  }
  octet::quant::reset_to_float(*model);
  return 0;
}
