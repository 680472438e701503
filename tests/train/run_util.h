// Helpers of the trainer tests: MNIST-format data a model can learn, a file's text, a run's metric
// records, and checking an error's message.
//   for (const auto& j : records_of(run.run_dir, "valid")) EXPECT_LT(j["ppl"].get<double>(), 100);
//   expect_error([&] { train(bad_recipe, {}); }, "recipe optimizer.lr");
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/octet.h"
#include "data/mnist.h"

namespace octet::train {

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  Generator g(seed);
  std::vector<float> v = rand({static_cast<int64_t>(n)}, DType::f32, &g).to_vector<float>();
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(v[i] * 255.0f);
  return out;
}

// MNIST-format data whose label is visible in the image (so a model can learn it).
inline void write_mnist(const std::string& root, int64_t n_train, int64_t n_test) {
  std::filesystem::create_directories(root);
  for (auto [name, n] : {std::pair{"train", n_train}, std::pair{"t10k", n_test}}) {
    std::vector<uint8_t> images = random_bytes(static_cast<size_t>(n) * 784, n), labels(n);
    for (int64_t i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(i % 10);
      for (int64_t p = 0; p < 28; ++p) images[i * 784 + p * 28 + labels[i]] = 255;  // a bright column
    }
    write_idx(root + "/" + name + "-images-idx3-ubyte.gz", images, {n, 28, 28});
    write_idx(root + "/" + name + "-labels-idx1-ubyte", labels, {n});
  }
}

// The whole content of a file ("" when it cannot be read).
inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The records of `split` ("train", "test", "valid", "int8") in <run_dir>/metrics.jsonl, in order.
inline std::vector<nlohmann::json> records_of(const std::string& run_dir, const std::string& split) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["split"] == split) out.push_back(j);
  }
  return out;
}

// `fn` throws an octet::Error whose message contains `fragment`.
inline void expect_error(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    FAIL() << "no error; expected one containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace octet::train
