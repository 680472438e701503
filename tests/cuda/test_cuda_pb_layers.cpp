// CUDA against CPU: an LstmLm with its LSTM and decoder quantized (PrecisionBatching and the int8
// baseline, layers/quantized.h) gives the same logits on the GPU, whether converted on the CPU and
// moved after (the preprocessed weights follow the input's device) or converted on the GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "core/octet.h"
#include "tests/cuda/parity.h"

namespace octet {
namespace {

class CudaPbLayers : public testing::CudaParityTest {};

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  EXPECT_EQ(va.size(), vb.size());
  float m = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) m = std::max(m, std::fabs(va[i] - vb[i]));
  return m;
}

TEST_F(CudaPbLayers, QuantizedLmMatchesCpu) {
  // The quantized products give the same integers and the same final float scale on both devices
  // (quant/pbatch.h, quant/qgemm.h); what differs is the float decoder GEMM and the gates' tanh /
  // exp: the f32 rounding of those, over logits of magnitude ~1.
  constexpr float kLogitTolerance = 1e-4f;
  manual_seed(5);
  LstmLm lm(LstmLmOptions().vocab_size(50).embed_dim(16).hidden_size(24).num_layers(2));
  lm.eval();
  NoGradGuard ng;
  const Tensor ids = from_vector<int64_t>({1, 4, 9, 16, 25, 36, 49, 0, 2, 3, 5, 7, 11, 13}, {2, 7});
  for (const quant::QuantSpec& spec :
       {quant::QuantSpec::pbatch({4, 16}), quant::QuantSpec::pbatch({1, 8}), quant::QuantSpec::int8(),
        quant::QuantSpec::pbatch({4, 16, true, quant::PbScheme::paper, true}),
        quant::QuantSpec::pbatch({1, 8, true, quant::PbScheme::paper})}) {
    quant::PrecisionPlan plan = quant::uniform_plan(spec);
    plan.layers["decoder"] = spec;  // the decoder too
    lm.to(Device::cpu());
    quant::convert_model(lm, plan);
    const Tensor cpu = lm.forward(ids);
    lm.to(testing::gpu());
    const Tensor moved = lm.forward(ids.to(testing::gpu())).to(Device::cpu());
    EXPECT_LE(max_abs_diff(moved, cpu), kLogitTolerance) << spec.name() << ", converted on the CPU";
    quant::convert_model(lm, plan);  // preprocessed from the weights on the GPU
    const Tensor on_gpu = lm.forward(ids.to(testing::gpu())).to(Device::cpu());
    EXPECT_LE(max_abs_diff(on_gpu, cpu), kLogitTolerance) << spec.name() << ", converted on the GPU";
  }
}

}  // namespace
}  // namespace octet
