// Helpers of the trainer tests: a run's metric records, and checking an error's message.
//   for (const auto& j : records_of(run.run_dir, "valid")) EXPECT_LT(j["ppl"].get<double>(), 100);
//   expect_error([&] { train(bad_recipe, {}); }, "recipe optimizer.lr");
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace octet::tools {

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

}  // namespace octet::tools
