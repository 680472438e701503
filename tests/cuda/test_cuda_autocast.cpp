// CUDA against CPU under bf16 autocast (core/autocast.h): the lower ops (mm, bmm, linear, conv2d,
// attention, the LSTM layer) with bf16 inputs and f32 accumulation on both devices (cuBLAS's bf16
// GEMM and cuDNN's bf16 convolutions on tensor cores; the CPU's oneDNN bf16 kernels or their
// emulation), forward and every input's gradient, odd sizes included.
#include <gtest/gtest.h>

#include <string>

#include "core/octet.h"
#include "tests/cuda/parity.h"

namespace octet {
namespace {

using testing::expect_parity;
using testing::Inputs;
using testing::kSums;
using testing::normal_input;
using testing::Outputs;

class CudaAutocast : public testing::CudaParityTest {};

// fn's outputs computed under AutocastGuard(bf16) on each device, rounded to bf16 and compared as
// f32: the CPU's lower ops write bf16, CUDA's f32 for now (autocast::output_dtype), so both are
// taken through bf16 (an identity on the CPU), and both backward passes start from the same
// bf16-rounded gradient.
testing::ParityFn under_bf16(testing::ParityFn fn) {
  return [fn](const Inputs& v) {
    Outputs out;
    {
      AutocastGuard autocast(DType::bf16);
      out = fn(v);
    }
    for (Tensor& t : out) t = t.to(DType::bf16).to(DType::f32);
    return out;
  };
}

// The outputs: equal bf16 roundings of f32 sums that agree to kSums, but for a sum that lands on
// either side of a rounding boundary: one bf16 unit (2^-8 relative). The gradients: kSums.
const testing::ParityOptions kRounded = testing::tolerances({{4e-3, 4e-3}, {4e-3, 4e-3}}, kSums);
// cuDNN's bf16 convolutions write bf16 dx and dw (widened after), where the CPU keeps them f32: a
// bf16 unit (2^-8 relative), and the sums' order beyond it.
const testing::ParityOptions kRoundedConv =
    testing::tolerances({{4e-3, 4e-3}, {4e-3, 4e-3}}, {{5e-3, 5e-3}, {5e-3, 5e-3}});
// Attention's gradients take P~ and dS rounded to bf16 on both devices; a value computed near a
// rounding boundary may round either way on each, moving a gradient row by a bf16 unit of it.
const testing::ParityOptions kRoundedAttention =
    testing::tolerances({{4e-3, 4e-3}, {4e-3, 4e-3}}, {{8e-3, 8e-3}, {8e-3, 8e-3}});

TEST_F(CudaAutocast, Products) {
  const DType t = DType::f32;
  expect_parity("bf16 mm", under_bf16([](const Inputs& v) { return Outputs{mm(v[0], v[1])}; }),
                {normal_input({37, 129}, t, 1), normal_input({129, 33}, t, 2)}, kRounded);
  expect_parity("bf16 bmm", under_bf16([](const Inputs& v) { return Outputs{bmm(v[0], v[1])}; }),
                {normal_input({3, 9, 17}, t, 3), normal_input({3, 17, 5}, t, 4)}, kRounded);
  expect_parity("bf16 linear", under_bf16([](const Inputs& v) { return Outputs{linear(v[0], v[1], v[2])}; }),
                {normal_input({2, 7, 65}, t, 5), normal_input({31, 65}, t, 6), normal_input({31}, t, 7)}, kRounded);
}

TEST_F(CudaAutocast, ConvolutionAttentionLstm) {
  const DType t = DType::f32;
  expect_parity("bf16 conv2d", under_bf16([](const Inputs& v) {
                  return Outputs{conv2d(v[0], v[1], v[2], Conv2dOptions().padding(1).stride(2))};
                }),
                {normal_input({2, 5, 9, 7}, t, 8), normal_input({6, 5, 3, 3}, t, 9), normal_input({6}, t, 10)},
                kRoundedConv);
  expect_parity("bf16 conv2d, 1x1, batch 3",
                under_bf16([](const Inputs& v) { return Outputs{conv2d(v[0], v[1], Tensor(), Conv2dOptions())}; }),
                {normal_input({3, 16, 5, 5}, t, 21), normal_input({24, 16, 1, 1}, t, 22)}, kRoundedConv);
  expect_parity("bf16 depthwise conv2d", under_bf16([](const Inputs& v) {
                  return Outputs{conv2d(v[0], v[1], Tensor(), Conv2dOptions().padding(1).groups(8))};
                }),
                {normal_input({2, 8, 7, 7}, t, 11), normal_input({8, 1, 3, 3}, t, 12)}, kRounded);
  expect_parity(
      "bf16 attention", under_bf16([](const Inputs& v) {
        return Outputs{scaled_dot_product_attention(v[0], v[1], v[2], AttentionOptions().causal(true))};
      }),
      {normal_input({2, 3, 33, 16}, t, 13), normal_input({2, 3, 33, 16}, t, 14), normal_input({2, 3, 33, 8}, t, 15)},
      kRoundedAttention);
  expect_parity("bf16 lstm_layer", under_bf16([](const Inputs& v) {
                  auto [y, s] = lstm_layer(v[0], LstmState{}, v[1], v[2], v[3], v[4]);
                  return Outputs{y, s.h, s.c};
                }),
                {normal_input({5, 3, 7}, t, 16), normal_input({24, 7}, t, 17), normal_input({24, 6}, t, 18),
                 normal_input({24}, t, 19), normal_input({24}, t, 20)},
                kRounded);
}

}  // namespace
}  // namespace octet
