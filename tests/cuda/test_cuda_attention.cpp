// CUDA against CPU: scaled_dot_product_attention (core/cuda/attention.cu against
// core/cpu/attention.cpp), forward and the gradients of q, k and v, with the causal and padding
// masks, odd lengths, head dims 1 to 128, a fully masked row, several query blocks, and dropout (both devices draw the
// same mask from one generator state).
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

TEST_P(CudaAttention, MatchesCpu) {
  const DType t = dtype();
  struct Case {
    std::string name;
    int64_t b, h, tq, tk, d, dv;
    bool causal, pad;
  };
  const Case cases[] = {
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
  uint64_t seed = 1;
  for (const Case& c : cases) {
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
        in, kSums);
  }
}

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

}  // namespace
}  // namespace octet
