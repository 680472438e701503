// Fuzzes the checkpoint reader: the safetensors parser (header, offsets, shapes, dtypes) and the
// checkpoint metadata on top of it, through the same path `octet train --resume` and `octet eval` take.
#include "core/error.h"
#include "fuzz_util.h"
#include "tools/train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = octet::fuzz::scratch_dir() + "/last.safetensors";
  octet::fuzz::write_bytes(path, data, size);
  try {
    octet::train::Checkpoint c = octet::train::load_checkpoint(path);
    for (const auto& [name, t] : c.model) (void)t.numel();
  } catch (const octet::Error&) {
  }
  return 0;
}
