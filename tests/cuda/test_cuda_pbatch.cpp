// CUDA PrecisionBatching against the CPU (quant/cuda/pbatch.cu): the activation planes and scales and
// pb_linear (from floats and from planes) bit for bit on many shapes (weight bits 1..8, activation
// bits 2..32, odd K, batch 1..8 and 11, NaN, infinite and zero rows), for both quantization schemes
// (quant/pbatch.h: the paper's static activation scale with its wrap) and the per-row weight step.
// Skipped without a GPU;
// OCTET_CUDA_TESTS_ON_CPU=1 runs them CPU against CPU (a check of the tests only).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/octet.h"
#include "quant/pbatch.h"
#include "tests/cuda/parity.h"

namespace octet::quant {
namespace {

using testing::bits_equal;
using testing::gpu;

Tensor inputs(int64_t rows, int64_t cols, uint64_t seed, bool special = false) {
  return testing::quant_rows_input(rows, cols, seed, special);
}

// Streams the arguments into one string (a case's name in messages).
template <class... T>
std::string cat(const T&... v) {
  std::ostringstream os;
  (os << ... << v);
  return os.str();
}

std::string name(int n, int k, int64_t cols, int64_t batch) {
  return cat("w", n, "a", k, " cols=", cols, " batch=", batch);
}

class CudaPbatch : public testing::CudaParityTest {};

TEST_F(CudaPbatch, ActivationPlanesEqualCpu) {
  for (int k : {2, 3, 8, 16, 31, 32})
    for (int64_t cols : {1, 63, 64, 65, 513, 2049})
      for (int64_t batch : {1, 5, 11}) {
        Tensor x = inputs(batch, cols, 10 * k + cols + batch, true);
        const PbActivations want = pb_quantize_activations(x, k);
        const PbActivations got = pb_quantize_activations(x.to(gpu()), k);
        EXPECT_EQ(got.planes.device(), gpu());
        EXPECT_TRUE(bits_equal(got.planes, want.planes, name(0, k, cols, batch) + " planes"));
        EXPECT_TRUE(bits_equal(got.scale, want.scale, name(0, k, cols, batch) + " scales"));
      }
}

TEST_F(CudaPbatch, LinearEqualsCpu) {
  const int64_t rows = 37;
  for (int n = 1; n <= kPbMaxWeightBits; ++n)
    for (int64_t cols : {1, 63, 100, 513, 2049}) {
      const PbWeights w = pb_preprocess(inputs(rows, cols, 100 * n + cols), n);
      const PbWeights wg = w.to(gpu());
      Tensor bias = inputs(1, rows, 7).view({rows});
      Tensor bias_g = bias.to(gpu());
      for (int k : {2, 3, 5, 8, 13, 16, 24, 31, 32})
        for (int64_t batch : {1, 2, 3, 4, 5, 6, 7, 8, 11}) {
          // Every batch size at two widths, three (one chunk of 1, a full one, two chunks) elsewhere.
          if (cols != 63 && cols != 513 && batch != 1 && batch != 8 && batch != 11) continue;
          Tensor x = inputs(batch, cols, 1000 * k + batch + cols, true);
          Tensor xg = x.to(gpu());
          const std::string what = name(n, k, cols, batch);
          EXPECT_TRUE(bits_equal(pb_linear(wg, xg, k, bias_g), pb_linear(w, x, k, bias), what + " with bias"));
          if (batch % 4 == 1) {  // without a bias, and from already quantized activations
            EXPECT_TRUE(bits_equal(pb_linear(wg, xg, k), pb_linear(w, x, k), what));
            EXPECT_TRUE(bits_equal(pb_linear(wg, pb_quantize_activations(xg, k), bias_g),
                                   pb_linear(w, pb_quantize_activations(x, k), bias), what + " from planes"));
          }
        }
    }
}

TEST_F(CudaPbatch, PaperSchemeAndRowStepEqualCpu) {
  const int64_t rows = 37;
  for (int variant = 1; variant < 4; ++variant)  // paper; octet per-row; paper per-row
    for (int n : {1, 2, 4, 8})
      for (int64_t cols : {1, 65, 513, 2049}) {
        PbConfig c;
        c.w_bits = n;
        c.scheme = variant % 2 ? PbScheme::paper : PbScheme::octet;
        c.row_step = variant >= 2;
        Tensor wf = inputs(rows, cols, 100 * n + cols + variant);
        if (cols > 1) wf.data<float>()[1] = 0.0f;  // a 1-bit paper code 0
        const PbWeights w = pb_preprocess(wf, c);
        const PbWeights wg = w.to(gpu());
        Tensor bias = inputs(1, rows, 7).view({rows});
        for (int k : {2, 8, 16, 32})
          for (int shift : {0, 6, 12})
            for (int64_t batch : {1, 8, 11}) {
              c.a_bits = k, c.a_shift = shift;
              // Scaled up so that values pass the k-bit range (the wrap) and int32 (the saturation).
              Tensor x = inputs(batch, cols, 1000 * k + batch + cols + shift, true) * 40.0;
              const std::string what = cat(pb_config_name(c), " cols=", cols, " batch=", batch);
              const PbActivations want = pb_quantize_activations(x, c);
              const PbActivations got = pb_quantize_activations(x.to(gpu()), c);
              EXPECT_TRUE(bits_equal(got.planes, want.planes, what + " planes"));
              EXPECT_TRUE(bits_equal(got.scale, want.scale, what + " scales"));
              EXPECT_TRUE(bits_equal(pb_linear(wg, x.to(gpu()), c, bias.to(gpu())), pb_linear(w, x, c, bias), what));
            }
      }
}

TEST_F(CudaPbatch, LinearLargeBatchAndRows) {
  // Several chunks of kPbMaxBatch, rows spanning many blocks, words a multiple of 32 lanes.
  const PbWeights w = pb_preprocess(inputs(1000, 2048, 1), 4);
  Tensor x = inputs(37, 2048, 2, true), bias = inputs(1, 1000, 3).view({1000});
  EXPECT_TRUE(bits_equal(pb_linear(w.to(gpu()), x.to(gpu()), 16, bias.to(gpu())), pb_linear(w, x, 16, bias), "w4a16"));
}

}  // namespace
}  // namespace octet::quant
