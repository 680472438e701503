// Fuzzes the recipe loader: YAML parsing and the schema's validation of sections, keys, types and
// ranges, then the resolved YAML a run folder and a checkpoint store.
#include <string>

#include "core/error.h"
#include "tools/train/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    octet::train::Recipe r =
        octet::train::parse_recipe(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
    (void)r.resolved_yaml();
  } catch (const octet::Error&) {
  }
  return 0;
}
