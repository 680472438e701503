// CUDA against CPU: the fused LSTM layer of core/ops/rnn.h (cuBLAS GEMMs around the fused gate
// kernels of core/cuda/rnn.cu) and the LSTM language model on the GPU.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
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
using testing::uniform_input;

class CudaRnn : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaRnn);

Outputs run_layer(const Inputs& v) {
  auto [y, s] = lstm_layer(v[0], LstmState{v[1], v[2]}, v[3], v[4], v[5], v[6]);
  return Outputs{y, s.h, s.c};
}

TEST_P(CudaRnn, LstmLayer) {
  const DType t = dtype();
  // Odd sizes (no multiple of a warp or a GEMM tile), with and without state and biases.
  const std::vector<std::array<int64_t, 4>> shapes = {{6, 3, 17, 33}, {1, 1, 5, 7}, {12, 8, 64, 96}};
  for (const auto& [steps, b, in, hs] : shapes) {
    const std::string shape = ::testing::PrintToString(std::vector<int64_t>{steps, b, in, hs});
    // Weights of the size of PyTorch's init, so the gates stay out of saturation over the steps.
    const double bound = 1.0 / std::sqrt(static_cast<double>(hs));
    Inputs v{normal_input({steps, b, in}, t, 1),
             normal_input({b, hs}, t, 2),
             normal_input({b, hs}, t, 3),
             uniform_input({4 * hs, in}, t, 4, -bound, bound),
             uniform_input({4 * hs, hs}, t, 5, -bound, bound),
             uniform_input({4 * hs}, t, 6, -bound, bound),
             uniform_input({4 * hs}, t, 7, -bound, bound)};
    expect_parity("lstm_layer " + shape, run_layer, v, kSums);
    expect_parity("lstm_layer without state and biases " + shape, run_layer,
                  {v[0], Tensor(), Tensor(), v[3], v[4], Tensor(), Tensor()}, kSums);
  }
}

TEST_P(CudaRnn, LstmLmStep) {
  // The whole model: embedding, two fused LSTM layers with state carried in, decoder, loss.
  manual_seed(3);
  LstmLm cpu_lm(LstmLmOptions().vocab_size(50).hidden_size(24).num_layers(2).dropout(0.0).tie_weights(true));
  cpu_lm.to(dtype());
  LstmLm gpu_lm(LstmLmOptions().vocab_size(50).hidden_size(24).num_layers(2).dropout(0.0).tie_weights(true));
  gpu_lm.to(dtype());
  gpu_lm.load_state_dict(cpu_lm.state_dict());
  gpu_lm.to(testing::gpu());
  Tensor ids = testing::index_input({3, 7}, 50, 4), targets = testing::index_input({21}, 50, 5);
  LstmState s = cpu_lm.initial_state(3);
  {
    NoGradGuard ng;
    s.h.copy_(normal_input({2, 3, 24}, dtype(), 6, false));
  }
  auto loss_of = [&](LstmLm& lm, Device d) {
    auto [logits, next] = lm.forward(ids.to(d), LstmState{s.h.to(d), s.c.to(d)});
    return cross_entropy(logits.reshape({-1, 50}), targets.to(d));
  };
  Tensor want = loss_of(cpu_lm, Device::cpu()), got = loss_of(gpu_lm, testing::gpu());
  EXPECT_TRUE(testing::all_close(got, want, kSums, "lstm_lm loss"));
  want.backward();
  got.backward();
  NamedTensors pc = cpu_lm.named_parameters(), pg = gpu_lm.named_parameters();
  ASSERT_EQ(pc.size(), pg.size());
  for (size_t i = 0; i < pc.size(); ++i)
    EXPECT_TRUE(testing::all_close(pg[i].second.grad(), pc[i].second.grad(), kSums, "d " + pc[i].first));
}

}  // namespace
}  // namespace octet
