// Checkpoints written by earlier versions of octet still resume, on the trajectory they were on
// (tests/train/data/: each folder's README says which version wrote it and how).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

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

// Largest |a - b| over max(1, max |b|), as f64.
double max_rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(DType::f64).contiguous().to_vector<double>();
  const std::vector<double> y = b.to(DType::f64).contiguous().to_vector<double>();
  double diff = 0, scale = 1;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return diff / scale;
}

// 8-bit Adam state without recorded maps: it resumes with the maps it was written with (the ones
// octet used then), on the trajectory that version took, and the new checkpoint records them.
// "On the trajectory", not bit for bit: f32 kernels may round differently in later versions (the
// f32 softmax's exps changed after this checkpoint was written), so weights are compared to 1e-5
// and the 8-bit codes to 99%. A state read with the wrong maps would miss both by far (the maps
// place their codes differently) and the recorded map is compared exactly.
TEST(OldCheckpoints, EightBitStateWithoutMapsResumesWithItsMaps) {
  const std::string data = std::string(OCTET_TESTS_DIR) + "/train/data/old_8bit_checkpoint";
  octet::testing::TempDir dir;
  const std::string run = dir.path() + "/run";
  fs::create_directories(run);
  for (const char* f : {"last.safetensors", "recipe.yaml"}) fs::copy_file(data + "/step6/" + f, run + "/" + f);
  // It predates the epoch's train sums in checkpoints (TrainState::epoch_sums): they read as none.
  EXPECT_EQ(load_checkpoint(run + "/last.safetensors").state.epoch_sums.n, 0);
  TrainResult r = Run::resume(run, {"train.max_steps=10"}).fit();
  EXPECT_EQ(r.steps, 10);
  const Checkpoint got = load_checkpoint(run + "/last.safetensors");
  const Checkpoint want = load_checkpoint(data + "/step10.safetensors");
  ASSERT_EQ(got.model.size(), want.model.size());
  for (size_t i = 0; i < want.model.size(); ++i)
    EXPECT_LT(max_rel_diff(got.model[i].second, want.model[i].second), 1e-5) << want.model[i].first;
  std::map<std::string, Tensor> state(got.optimizer.begin(), got.optimizer.end());
  int eight_bit = 0;
  for (const auto& [key, t] : want.optimizer) {
    ASSERT_TRUE(state.count(key)) << key;
    const Tensor& g = state.at(key);
    if (key.ends_with(".codes")) {
      ++eight_bit;
      const std::vector<uint8_t> a = g.to_vector<uint8_t>(), b = t.to_vector<uint8_t>();
      ASSERT_EQ(a.size(), b.size()) << key;
      size_t same = 0;
      for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
      EXPECT_GE(static_cast<double>(same), 0.99 * static_cast<double>(a.size())) << key;
      const std::string base = key.substr(0, key.size() - 6);
      const bool second = base.find("_sq") != std::string::npos;
      const auto& map =
          quant::quant_map(second ? quant::QuantMap::dynamic_unsigned_upper : quant::QuantMap::dynamic_signed_upper);
      ASSERT_TRUE(state.count(base + ".map")) << base;
      EXPECT_EQ(std::memcmp(state.at(base + ".map").data<float>(), map.data(), sizeof(map)), 0) << base;
    } else if (t.dtype() == DType::f32) {
      EXPECT_LT(max_rel_diff(g, t), 1e-4) << key;  // absmax and 32-bit states
    } else {
      EXPECT_TRUE(same_bits(g, t)) << key;  // step counts
    }
  }
  EXPECT_GT(eight_bit, 4);
}

}  // namespace
}  // namespace octet::train
