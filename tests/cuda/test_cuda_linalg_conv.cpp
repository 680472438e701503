// CUDA against CPU: matrix products (mm, bmm, matmul, linear; transposed operands, odd sizes,
// large K, TF32), conv2d (stride, padding, dilation, groups, depthwise, pointwise, odd sizes,
// no bias) and the pooling ops (max, avg with and without counting padding, adaptive).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/octet.h"
#include "tests/cuda/parity.h"

namespace octet {
namespace {

using testing::expect_parity;
using testing::Inputs;
using testing::kConv;
using testing::kExact;
using testing::kSums;
using testing::normal_input;
using testing::Outputs;
using testing::tolerances;
using testing::uniform_input;

class CudaLinalg : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaLinalg);

TEST_P(CudaLinalg, Mm) {
  const DType t = dtype();
  struct Case {
    int64_t m, k, n;
  };
  // Tiny, odd (not a multiple of any tile), tall-skinny, and large K.
  for (Case c : {Case{1, 1, 1}, Case{3, 4, 5}, Case{37, 53, 29}, Case{513, 7, 3}, Case{64, 4096, 48}}) {
    std::string s = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n);
    expect_parity(
        "mm " + s, [](const Inputs& v) { return Outputs{mm(v[0], v[1])}; },
        {normal_input({c.m, c.k}, t, 1), normal_input({c.k, c.n}, t, 2)}, kSums);
    // Transposed operands reach the GEMM as strided views (no copy on the CPU side).
    expect_parity(
        "mm transposed " + s, [](const Inputs& v) { return Outputs{mm(v[0].t(), v[1].t())}; },
        {normal_input({c.k, c.m}, t, 3), normal_input({c.n, c.k}, t, 4)}, kSums);
    expect_parity(
        "mm of a column slice " + s,
        [](const Inputs& v) { return Outputs{mm(v[0].narrow(1, 1, v[0].size(1) - 2), v[1])}; },
        {normal_input({c.m, c.k + 2}, t, 5), normal_input({c.k, c.n}, t, 6)}, kSums);
  }
}

TEST_P(CudaLinalg, BmmMatmulLinear) {
  const DType t = dtype();
  expect_parity(
      "bmm", [](const Inputs& v) { return Outputs{bmm(v[0], v[1])}; },
      {normal_input({5, 17, 33}, t, 11), normal_input({5, 33, 9}, t, 12)}, kSums);
  expect_parity(
      "bmm transposed", [](const Inputs& v) { return Outputs{bmm(v[0].transpose(1, 2), v[1])}; },
      {normal_input({4, 33, 17}, t, 13), normal_input({4, 33, 9}, t, 14)}, kSums);
  // matmul's shape rules: broadcast batch dims, 1-D operands promoted.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 1, 6, 8}, {3, 8, 5}}, {{2, 3, 4}, {4, 7}}, {{4}, {4, 3}}, {{3, 4}, {4}}, {{300}, {300}},
      {{6, 4}, {2, 4, 5}}};
  uint64_t seed = 20;
  for (const auto& [a, b] : shapes) {
    expect_parity(
        "matmul " + ::testing::PrintToString(a) + " x " + ::testing::PrintToString(b),
        [](const Inputs& v) { return Outputs{matmul(v[0], v[1])}; },
        {normal_input(a, t, seed), normal_input(b, t, seed + 1)}, kSums);
    seed += 2;
  }
  expect_parity(
      "linear with bias", [](const Inputs& v) { return Outputs{linear(v[0], v[1], v[2])}; },
      {normal_input({2, 7, 100}, t, 31), normal_input({50, 100}, t, 32), normal_input({50}, t, 33)}, kSums);
  expect_parity(
      "linear without bias", [](const Inputs& v) { return Outputs{linear(v[0], v[1])}; },
      {normal_input({9, 100}, t, 34), normal_input({50, 100}, t, 35)}, kSums);
}

// TF32 applies to f32 only: one test, not one per dtype (a skip on a GPU machine reads as a failure).
class CudaLinalgF32 : public testing::CudaParityTest {};

TEST_F(CudaLinalgF32, Tf32) {
  // TF32 rounds inputs to a 10-bit mantissa (2^-11 ~ 5e-4 relative per product); a random-order
  // sum of K such products keeps that relative to the output's scale.
  constexpr testing::Tolerances kTf32{{5e-3, 3e-3}, {0, 0}};
  cuda::set_allow_tf32(true);
  expect_parity(
      "mm with TF32", [](const Inputs& v) { return Outputs{mm(v[0], v[1])}; },
      {normal_input({128, 1024}, DType::f32, 41), normal_input({1024, 96}, DType::f32, 42)}, kTf32);
  cuda::set_allow_tf32(false);
}

// ---------------------------------------------------------------- conv2d

class CudaConv : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaConv);

struct ConvCase {
  std::string name;
  Shape x, w;  // [N,C,H,W], [K,C/g,R,S]
  Conv2dOptions opts;
  bool bias = true;
};

TEST_P(CudaConv, Conv2d) {
  const DType t = dtype();
  const ConvCase cases[] = {
      {"3x3 pad 1", {2, 3, 8, 8}, {4, 3, 3, 3}, Conv2dOptions().padding(1)},
      {"3x3 stride 2 pad 1", {2, 4, 9, 11}, {6, 4, 3, 3}, Conv2dOptions().stride(2).padding(1)},
      {"dilation 2", {1, 3, 12, 10}, {5, 3, 3, 3}, Conv2dOptions().dilation(2).padding(2)},
      {"groups 2", {2, 4, 7, 7}, {6, 2, 3, 3}, Conv2dOptions().groups(2).padding(1)},
      {"depthwise", {2, 8, 10, 10}, {8, 1, 3, 3}, Conv2dOptions().groups(8).padding(1)},
      {"depthwise stride 2", {2, 6, 9, 9}, {12, 1, 5, 5}, Conv2dOptions().groups(6).stride(2).padding(2)},
      {"pointwise 1x1", {3, 16, 5, 5}, {8, 16, 1, 1}, Conv2dOptions()},
      {"odd 5x3 kernel, asymmetric stride and padding",
       {2, 3, 13, 9},
       {4, 3, 5, 3},
       Conv2dOptions().stride(2, 1).padding(1, 2)},
      {"7x7 stride 2 stem", {2, 3, 33, 33}, {8, 3, 7, 7}, Conv2dOptions().stride(2).padding(3)},
      {"no bias", {2, 5, 6, 6}, {7, 5, 3, 3}, Conv2dOptions().padding(1), false},
      {"large K (C*R*S = 1152)", {2, 128, 6, 6}, {16, 128, 3, 3}, Conv2dOptions().padding(1)},
      {"1x1 output", {4, 3, 3, 3}, {5, 3, 3, 3}, Conv2dOptions()},
  };
  uint64_t seed = 1;
  for (const ConvCase& c : cases) {
    Tensor bias = c.bias ? normal_input({c.w[0]}, t, seed + 2) : Tensor();
    Conv2dOptions o = c.opts;
    expect_parity(
        "conv2d " + c.name, [o](const Inputs& v) { return Outputs{conv2d(v[0], v[1], v[2], o)}; },
        {normal_input(c.x, t, seed), normal_input(c.w, t, seed + 1), bias}, kConv);
    seed += 3;
  }
  // A non-contiguous (channels-last view) input.
  expect_parity(
      "conv2d of a permuted input",
      [](const Inputs& v) {
        return Outputs{conv2d(v[0].permute({0, 3, 1, 2}), v[1], v[2], Conv2dOptions().padding(1))};
      },
      {normal_input({2, 6, 6, 3}, t, 90), normal_input({4, 3, 3, 3}, t, 91), normal_input({4}, t, 92)}, kConv);
  // Gradient for the weight only (input does not require grad), as in a first layer.
  expect_parity(
      "conv2d weight grad only",
      [](const Inputs& v) { return Outputs{conv2d(v[0], v[1], Tensor(), Conv2dOptions().stride(2).padding(1))}; },
      {normal_input({2, 3, 10, 10}, t, 93, false), normal_input({4, 3, 3, 3}, t, 94)}, kConv);
}

// ---------------------------------------------------------------- pooling

class CudaPool : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaPool);

TEST_P(CudaPool, MaxPool) {
  const DType t = dtype();
  Tensor x = normal_input({2, 3, 13, 11}, t, 1);
  // Max pooling selects: exact forward; overlapping windows add gradients in another order.
  auto tol = tolerances(kExact, kSums);
  struct Case {
    const char* name;
    Shape k, s, p, d;
  };
  for (const Case& c : {Case{"2x2", {2}, {}, {0}, {1}}, Case{"3x3 stride 2 pad 1", {3}, {2}, {1}, {1}},
                        Case{"3x2 stride (1,2)", {3, 2}, {1, 2}, {1, 0}, {1}},
                        Case{"3x3 dilation 2", {3}, {1}, {1}, {2}}, Case{"5x5 stride 3 pad 2", {5}, {3}, {2}, {1}}}) {
    Case cc = c;
    expect_parity(
        std::string("max_pool2d ") + c.name,
        [cc](const Inputs& v) { return Outputs{max_pool2d(v[0], cc.k, cc.s, cc.p, cc.d)}; }, {x}, tol);
  }
  expect_parity(
      "max_pool2d 3-D input", [](const Inputs& v) { return Outputs{max_pool2d(v[0], {2})}; },
      {normal_input({3, 8, 8}, t, 2)}, tol);
  expect_parity(
      "max_pool2d of a transposed plane",
      [](const Inputs& v) { return Outputs{max_pool2d(v[0].transpose(2, 3), {3}, {2}, {1})}; }, {x}, tol);
}

TEST_P(CudaPool, AvgPool) {
  const DType t = dtype();
  Tensor x = normal_input({2, 3, 13, 11}, t, 11);
  struct Case {
    const char* name;
    Shape k, s, p;
  };
  for (bool include_pad : {true, false})
    for (const Case& c : {Case{"2x2", {2}, {}, {0}}, Case{"3x3 stride 2 pad 1", {3}, {2}, {1}},
                          Case{"3x2 stride (1,2) pad (1,1)", {3, 2}, {1, 2}, {1, 1}}}) {
      Case cc = c;
      expect_parity(
          std::string("avg_pool2d ") + c.name + (include_pad ? " counting padding" : ""),
          [cc, include_pad](const Inputs& v) { return Outputs{avg_pool2d(v[0], cc.k, cc.s, cc.p, include_pad)}; }, {x},
          kSums);
    }
  expect_parity(
      "avg_pool2d 3-D input", [](const Inputs& v) { return Outputs{avg_pool2d(v[0], {3}, {1}, {1})}; },
      {normal_input({4, 7, 7}, t, 12)}, kSums);
}

TEST_P(CudaPool, AdaptiveAvgPool) {
  const DType t = dtype();
  Tensor x = normal_input({2, 5, 7, 10}, t, 21);
  // Global pooling, divisible and non-divisible (overlapping windows), upsampling (P > H).
  for (const Shape& out : {Shape{1, 1}, Shape{7, 5}, Shape{3, 4}, Shape{5}, Shape{9, 13}})
    expect_parity(
        "adaptive_avg_pool2d to " + ::testing::PrintToString(out),
        [out](const Inputs& v) { return Outputs{adaptive_avg_pool2d(v[0], out)}; }, {x}, kSums);
  expect_parity(
      "adaptive_avg_pool2d of a large plane",
      [](const Inputs& v) {
        return Outputs{adaptive_avg_pool2d(v[0], {1, 1})};
      },
      {normal_input({2, 3, 64, 64}, t, 22)}, kSums);
  expect_parity(
      "adaptive_avg_pool2d 3-D input", [](const Inputs& v) { return Outputs{adaptive_avg_pool2d(v[0], {2})}; },
      {uniform_input({3, 5, 5}, t, 23)}, kSums);
}

}  // namespace
}  // namespace octet
