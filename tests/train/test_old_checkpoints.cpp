// Checkpoints written by earlier versions of octet still resume, on the trajectory they were on
// (tests/train/data/: each folder's README says which version wrote it and how).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "core/octet.h"
#include "quant/maps.h"
#include "tests/data/temp_dir.h"
#include "tools/train/checkpoint.h"
#include "tools/train/run.h"

namespace octet::train {
namespace {

namespace fs = std::filesystem;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(),
                     static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

// 8-bit Adam state without recorded maps: it resumes with the maps it was written with (the ones
// octet used then), bit for bit the steps that version took, and the new checkpoint records them.
TEST(OldCheckpoints, EightBitStateWithoutMapsResumesWithItsMaps) {
  const std::string data = std::string(OCTET_TESTS_DIR) + "/train/data/old_8bit_checkpoint";
  octet::testing::TempDir dir;
  const std::string run = dir.path() + "/run";
  fs::create_directories(run);
  for (const char* f : {"last.safetensors", "recipe.yaml"}) fs::copy_file(data + "/step6/" + f, run + "/" + f);
  TrainResult r = Run::resume(run, {"train.max_steps=10"}).fit();
  EXPECT_EQ(r.steps, 10);
  const Checkpoint got = load_checkpoint(run + "/last.safetensors");
  const Checkpoint want = load_checkpoint(data + "/step10.safetensors");
  ASSERT_EQ(got.model.size(), want.model.size());
  for (size_t i = 0; i < want.model.size(); ++i)
    EXPECT_TRUE(same_bits(got.model[i].second, want.model[i].second)) << want.model[i].first;
  std::map<std::string, Tensor> state(got.optimizer.begin(), got.optimizer.end());
  int eight_bit = 0;
  for (const auto& [key, t] : want.optimizer) {
    ASSERT_TRUE(state.count(key)) << key;
    EXPECT_TRUE(same_bits(state.at(key), t)) << key;
    if (key.size() > 6 && key.compare(key.size() - 6, 6, ".codes") == 0) {
      ++eight_bit;
      const std::string base = key.substr(0, key.size() - 6);
      const bool second = base.find("_sq") != std::string::npos;
      const auto& map = quant::quant_map(second ? quant::QuantMap::dynamic_unsigned_upper
                                                : quant::QuantMap::dynamic_signed_upper);
      ASSERT_TRUE(state.count(base + ".map")) << base;
      EXPECT_EQ(std::memcmp(state.at(base + ".map").data<float>(), map.data(), sizeof(map)), 0) << base;
    }
  }
  EXPECT_GT(eight_bit, 4);
}

}  // namespace
}  // namespace octet::train
