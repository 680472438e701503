// safetensors: round trips, the reference implementation's file, and rejection of bad files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/octet.h"

namespace octet {
namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  fs::path d = fs::temp_directory_path() / ("octet_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d.string();
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A well-formed file built by hand: header JSON, then `data`.
std::string make_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

void expect_rejected(const std::string& bytes, const std::string& fragment) {
  try {
    parse_safetensors(bytes, "bad.safetensors");
    FAIL() << "accepted a bad file; expected an error containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, RoundTripAllDtypes) {
  std::string path = temp_dir() + "/rt.safetensors";
  Generator g(1);
  NamedTensors in = {
      {"w", randn({3, 5}, DType::f32, &g)},
      {"d", randn({2}, DType::f64, &g)},
      {"b", randn({4}, DType::f32, &g).to(DType::bf16)},
      {"codes", from_vector<uint8_t>({1, 2, 255}, {3})},
      {"i8", from_vector<int8_t>({-128, 127}, {2})},
      {"i32", from_vector<int32_t>({-5}, {1})},
      {"step", scalar_tensor(42, DType::i64)},
      {"view", randn({4, 6}, DType::f32, &g).t()},  // non-contiguous: saved in row-major order
      {"empty", zeros({0, 3})},
  };
  save_safetensors(path, in, {{"epoch", "3"}, {"recipe", "model:\n  name: x\n"}});
  SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(f.tensors[i].first, in[i].first);  // file order is kept
    const Tensor& a = in[i].second;
    const Tensor& b = f.tensors[i].second;
    EXPECT_EQ(a.shape(), b.shape());
    EXPECT_EQ(a.dtype(), b.dtype());
    EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << in[i].first;
  }
  EXPECT_EQ(f.metadata.at("epoch"), "3");
  EXPECT_EQ(f.metadata.at("recipe"), "model:\n  name: x\n");
  EXPECT_EQ(f.at("step").item<int64_t>(), 42);
  EXPECT_THROW(f.at("nope"), Error);
  // The data buffer starts 8-byte aligned (the header is padded with spaces).
  std::string bytes = file_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(Safetensors, ReadsTheReferenceImplementationsFile) {
  // Written by tests/core/data/make_safetensors_golden.py with the Python safetensors package.
  SafetensorsFile f = load_safetensors(std::string(OCTET_TESTS_DIR) + "/core/data/golden.safetensors");
  EXPECT_EQ(f.metadata.at("note"), "octet golden");
  EXPECT_EQ(f.at("f32").to_vector<float>(), (std::vector<float>{0, 0.25, 0.5, 0.75, 1, 1.25}));
  EXPECT_EQ(f.at("f32").shape(), (Shape{2, 3}));
  EXPECT_EQ(f.at("f64").to_vector<double>(), (std::vector<double>{1.5, -2.25}));
  EXPECT_EQ(f.at("i64").to_vector<int64_t>(), (std::vector<int64_t>{-3, 7}));
  EXPECT_EQ(f.at("u8").to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255, 17}));
  EXPECT_EQ(f.at("scalar").dim(), 0);
  EXPECT_EQ(f.at("empty").shape(), (Shape{0, 4}));
}

TEST(Safetensors, RejectsBadFiles) {
  const std::string ok_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data(8, '\0');
  EXPECT_NO_THROW(parse_safetensors(make_file(ok_header, data), "good"));
  expect_rejected("abc", "8-byte header length");
  expect_rejected(make_file(ok_header, data).substr(0, 30), "exceeds the file size");  // truncated header
  expect_rejected(make_file(ok_header, data.substr(0, 4)), "outside");                 // truncated data
  std::string huge(8, '\xff');
  expect_rejected(huge + "{}", "exceeds the limit");
  expect_rejected(make_file("{not json", ""), "not valid JSON");
  expect_rejected(make_file("[1,2]", ""), "does not start with '{'");
  expect_rejected(make_file(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", "1234"), "unsupported dtype");
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data), "needs 12");
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data), "nonnegative");
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[2]}})", data), "needs dtype, shape and data_offsets");
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                            data),
                  "overlaps");
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data), "hole");
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", data), "after the last");
  expect_rejected(make_file(R"({"__metadata__":{"k":1}})", ""), "not a string");
  expect_rejected(
      make_file(R"({"a":{"dtype":"F32","shape":[1099511627777,1099511627777],"data_offsets":[0,8]}})", data),
      "too large");
  EXPECT_THROW(load_safetensors("/nonexistent/x.safetensors"), Error);
}

// Sizes claimed by the header are checked against the file before anything is allocated.
TEST(Safetensors, ClaimedSizesAreBoundedByTheFile) {
  // 10^12 elements of F32 in a file of a few bytes.
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,8]}})",
                            std::string(8, '\0')),
                  "needs 4000000000000");
  // 2^61 F64 elements are 2^64 bytes, which wraps to 0 in 64-bit arithmetic and so matched the
  // empty span [0, 0]: the reader then tried to allocate 2^64 bytes.
  expect_rejected(make_file(R"({"a":{"dtype":"F64","shape":[1099511627776,2097152],"data_offsets":[0,0]}})", ""),
                  "too large");
  // A header nested far deeper than any valid one.
  expect_rejected(make_file("{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}", ""),
                  "nests deeper");
}

TEST(Safetensors, FailedWriteLeavesNoFile) {
  EXPECT_THROW(save_safetensors("/nonexistent-dir/x.safetensors", {{"a", zeros({2})}}), Error);
  EXPECT_THROW(save_safetensors(temp_dir() + "/dup.safetensors", {{"a", zeros({2})}, {"a", zeros({1})}}), Error);
}

}  // namespace
}  // namespace octet
