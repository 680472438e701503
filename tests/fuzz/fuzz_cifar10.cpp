// Fuzzes the CIFAR-10 binary batch reader (test_batch.bin under a data root).
#include "core/error.h"
#include "core/generator.h"
#include "data/cifar10.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string root = octet::fuzz::scratch_dir();
  octet::fuzz::write_bytes(root + "/test_batch.bin", data, size);
  try {
    auto ds = octet::cifar10(root, /*train=*/false);
    octet::Generator g(0);
    if (ds->size() > 0) (void)ds->get(ds->size() - 1, g);
  } catch (const octet::Error&) {
  }
  return 0;
}
