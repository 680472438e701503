// CUDA against CPU: scaled_dot_product_attention (core/cuda/attention.cu against
// core/cpu/attention.cpp), forward and the gradients of q, k and v, with the causal and padding
// masks, odd lengths, head dims 1 to 128, a fully masked row, several query blocks, and dropout
// (both devices draw the same mask from one generator state); in f32, f64 and, for the bf16
// kernels, on bf16 q, k, v.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/octet.h"
#include "tests/cuda/parity.h"

namespace octet {
namespace {

using testing::expect_parity;
using testing::Inputs;
using testing::kSums;
using testing::normal_input;
using testing::Outputs;

class CudaAttention : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaAttention);

// Batch n masks its last n + 1 keys; the last batch masks them all (its rows are 0).
Tensor padding(int64_t b, int64_t tk) {
  std::vector<double> m(static_cast<size_t>(b * tk), 0.0);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t j = n + 1 == b ? 0 : std::max<int64_t>(1, tk - n - 1); j < tk; ++j)
      m[static_cast<size_t>(n * tk + j)] = 1.0;
  return from_vector(m, {b, tk}).to(DType::u8);
}

struct Case {
  std::string name;
  int64_t b, h, tq, tk, d, dv;
  bool causal, pad;
};
const Case kCases[] = {
    {"square", 2, 3, 37, 37, 16, 16, false, false},
    {"causal Tq < Tk", 1, 2, 30, 131, 8, 12, true, false},
    {"head dim 1", 2, 1, 45, 45, 1, 1, true, false},
    {"head dim 80", 1, 2, 70, 70, 80, 80, false, false},
    {"head dim 128", 1, 1, 65, 97, 128, 128, true, false},
    {"padding", 3, 2, 33, 65, 8, 8, false, true},
    {"causal and padding", 3, 2, 66, 66, 8, 8, true, true},
    // More query rows than one block of the CUDA kernel (256): the blocks' key ranges differ when
    // causal, and dK, dV add over the blocks.
    {"three query blocks, causal", 1, 2, 600, 600, 16, 16, true, false},
    {"three query blocks, padding, Tq > Tk", 3, 1, 520, 130, 8, 4, false, true},
};

// Every case on inputs of dtype t: the outputs and the gradients of q, k and v within `tol`.
void expect_cases_match(DType t, const testing::ParityOptions& tol) {
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    Inputs in{normal_input({c.b, c.h, c.tq, c.d}, t, seed), normal_input({c.b, c.h, c.tk, c.d}, t, seed + 1),
              normal_input({c.b, c.h, c.tk, c.dv}, t, seed + 2)};
    seed += 10;
    const Tensor pad = c.pad ? padding(c.b, c.tk) : Tensor();
    expect_parity(
        "attention " + c.name,
        [&](const Inputs& v) {
          AttentionOptions o = AttentionOptions().causal(c.causal);
          if (pad.defined()) o.key_padding_mask(pad.to(v[0].device()));
          return Outputs{scaled_dot_product_attention(v[0], v[1], v[2], o)};
        },
        in, tol);
  }
}

TEST_P(CudaAttention, MatchesCpu) { expect_cases_match(dtype(), testing::tolerances(kSums, kSums)); }

TEST_P(CudaAttention, DropoutDrawsTheSameMask) {
  const DType t = dtype();
  for (const int64_t tq : {19, 300}) {  // one query block and two
    Inputs in{normal_input({2, 2, tq, 8}, t, 51), normal_input({2, 2, 23 + tq, 8}, t, 52),
              normal_input({2, 2, 23 + tq, 5}, t, 53)};
    expect_parity(
        "attention with dropout, Tq " + std::to_string(tq),
        [](const Inputs& v) {
          Generator gen(11);  // the same state on each device's run
          return Outputs{
              scaled_dot_product_attention(v[0], v[1], v[2], AttentionOptions().causal(true).dropout(0.25, &gen))};
        },
        in, kSums);
  }
}

// bf16 q, k, v (autocast's activations): both devices' bf16 kernels, every product of bf16
// operands summed in f32 (on tensor cores on the GPU), P~ and dS rounded to bf16 before their
// products, the output rounded once. A value computed near a rounding boundary may round either way
// on each device: a bf16 unit (2^-8) for the output, a few for the gradients built on P~ and dS.
class CudaAttentionBf16 : public testing::CudaParityTest {};

TEST_F(CudaAttentionBf16, MatchesCpu) {
  const testing::ParityOptions tol = testing::tolerances({{4e-3, 4e-3}, {4e-3, 4e-3}}, {{8e-3, 8e-3}, {8e-3, 8e-3}});
  expect_cases_match(DType::bf16, tol);
  Inputs in{normal_input({2, 2, 300, 8}, DType::bf16, 61), normal_input({2, 2, 323, 8}, DType::bf16, 62),
            normal_input({2, 2, 323, 5}, DType::bf16, 63)};
  expect_parity(
      "bf16 attention with dropout, two query blocks",
      [](const Inputs& v) {
        Generator gen(11);
        return Outputs{
            scaled_dot_product_attention(v[0], v[1], v[2], AttentionOptions().causal(true).dropout(0.25, &gen))};
      },
      in, tol);
}

}  // namespace
}  // namespace octet
