// Fuzzes the MAT-file reader (data/fetch/matlab.h; `octet data prepare imagenet` reads the devkit's
// meta.mat with it), plain and zlib-compressed variables, and a walk over what it returns.
#include "core/error.h"
#include "data/fetch/matlab.h"

namespace {

void walk(const octet::MatValue& v) {
  for (const octet::MatValue& e : v.elements) walk(e);
  if (v.kind == octet::MatValue::Kind::structure && v.count() > 0 && !v.fields.empty())
    (void)v.field(v.count() - 1, v.fields.back());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    for (const auto& kv : octet::read_mat_file(std::vector<uint8_t>(data, data + size), "fuzz.mat")) walk(kv.second);
  } catch (const octet::Error&) {
  }
  return 0;
}
