// Fuzzes the (Fashion-)MNIST IDX reader, plain and gzip. The input is split in two files, images
// then labels: its first byte says where (as a fraction of the rest), so both can be mutated.
#include "core/error.h"
#include "core/generator.h"
#include "data/mnist.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string images = octet::fuzz::scratch_dir() + "/images", labels = octet::fuzz::scratch_dir() + "/labels";
  const size_t rest = size - 1, split = rest * data[0] / 255;
  octet::fuzz::write_bytes(images, data + 1, split);
  octet::fuzz::write_bytes(labels, data + 1 + split, rest - split);
  try {
    auto ds = octet::mnist_idx(images, labels);
    octet::Generator g(0);
    if (ds->size() > 0) (void)ds->get(ds->size() - 1, g);
  } catch (const octet::Error&) {
  }
  return 0;
}
