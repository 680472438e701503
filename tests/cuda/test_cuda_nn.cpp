// CUDA against CPU: the building blocks of core/ops/nn.h: batch norm (training with running
// statistics, fused with relu/relu6, evaluation), layer norm, embedding, gather, dropout, cat/stack and the LSTM cell.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/octet.h"
#include "tests/cuda/parity.h"

namespace octet {
namespace {

using testing::all_close;
using testing::expect_parity;
using testing::index_input;
using testing::Inputs;
using testing::kExact;
using testing::kPointwise;
using testing::kSums;
using testing::normal_input;
using testing::Outputs;
using testing::ParityRun;
using testing::tolerances;
using testing::uniform_input;

class CudaNorm : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaNorm);

TEST_P(CudaNorm, BatchNormTraining) {
  const DType t = dtype();
  // 4-D (per-channel statistics over N*H*W), 2-D (over N) and 3-D inputs; with and without affine.
  for (const Shape& shape : {Shape{4, 3, 5, 7}, Shape{16, 10}, Shape{3, 6, 40}, Shape{2, 4, 33, 33}}) {
    const int64_t c = shape[1];
    for (bool affine : {true, false}) {
      std::string name = "batch_norm training " + ::testing::PrintToString(shape) + (affine ? " affine" : "");
      Inputs in{normal_input(shape, t, 1), uniform_input({c}, t, 2, -0.5, 0.5, false),  // running_mean
                uniform_input({c}, t, 3, 0.5, 2.0, false),                              // running_var
                affine ? normal_input({c}, t, 4) : Tensor(), affine ? normal_input({c}, t, 5) : Tensor()};
      // The running statistics are updated in place: return them to compare them too.
      expect_parity(
          name,
          [](const Inputs& v) {
            Tensor y =
                batch_norm(v[0] * 3.0 + 1.0,
                           {.running_mean = v[1], .running_var = v[2], .weight = v[3], .bias = v[4], .training = true});
            return Outputs{y, v[1], v[2]};
          },
          in, kSums);
    }
  }
  // Without running statistics (track_running_stats=False) and with a non-contiguous input.
  expect_parity(
      "batch_norm training, no running stats, permuted input",
      [](const Inputs& v) {
        return Outputs{batch_norm(v[0].permute({0, 3, 1, 2}), {.weight = v[1], .bias = v[2], .training = true})};
      },
      {normal_input({2, 5, 6, 3}, t, 6), normal_input({3}, t, 7), normal_input({3}, t, 8)}, kSums);
}

// Fused with a following relu/relu6 (core/norm_act.h): the forward's activation and the backward's
// mask from the recomputed pre-activation, on outputs spread across 0 and 6.
TEST_P(CudaNorm, BatchNormActTraining) {
  const DType t = dtype();
  for (NormActivation act : {NormActivation::relu, NormActivation::relu6}) {
    for (const Shape& shape : {Shape{4, 3, 5, 7}, Shape{2, 4, 33, 33}}) {
      const int64_t c = shape[1];
      expect_parity(
          std::string("batch_norm + ") + (act == NormActivation::relu ? "relu " : "relu6 ") +
              ::testing::PrintToString(shape),
          [act](const Inputs& v) {
            return Outputs{batch_norm(v[0], {.weight = v[1], .bias = v[2], .training = true, .act = act})};
          },
          {normal_input(shape, t, 21), uniform_input({c}, t, 22, 1.0, 4.0), uniform_input({c}, t, 23, 0.0, 4.0)},
          kSums);
    }
  }
}

// With a residual (the ResNet and MobileNetV2 blocks): act(batch_norm(x) + r), every gradient
// including the residual's.
TEST_P(CudaNorm, BatchNormResidualTraining) {
  const DType t = dtype();
  for (NormActivation act : {NormActivation::none, NormActivation::relu, NormActivation::relu6}) {
    for (const Shape& shape : {Shape{4, 3, 5, 7}, Shape{2, 4, 33, 33}}) {
      const int64_t c = shape[1];
      expect_parity(
          "batch_norm + residual, act " + std::to_string(static_cast<int>(act)) + " " + ::testing::PrintToString(shape),
          [act](const Inputs& v) {
            return Outputs{
                batch_norm(v[0], {.weight = v[1], .bias = v[2], .training = true, .act = act, .residual = v[3]})};
          },
          {normal_input(shape, t, 31), uniform_input({c}, t, 32, 1.0, 4.0), uniform_input({c}, t, 33, 0.0, 4.0),
           normal_input(shape, t, 34)},
          kSums);
    }
  }
}

TEST_P(CudaNorm, BatchNormEval) {
  const DType t = dtype();
  expect_parity(
      "batch_norm eval",
      [](const Inputs& v) {
        return Outputs{batch_norm(v[0], {.running_mean = v[1], .running_var = v[2], .weight = v[3], .bias = v[4]})};
      },
      {normal_input({3, 4, 5, 5}, t, 11), uniform_input({4}, t, 12, -0.5, 0.5, false),
       uniform_input({4}, t, 13, 0.5, 2.0, false), normal_input({4}, t, 14), normal_input({4}, t, 15)},
      tolerances(kPointwise, kSums));
}

TEST_P(CudaNorm, LayerNorm) {
  const DType t = dtype();
  expect_parity(
      "layer_norm last dim", [](const Inputs& v) { return Outputs{layer_norm(v[0], {512}, v[1], v[2])}; },
      {normal_input({3, 7, 512}, t, 21), normal_input({512}, t, 22), normal_input({512}, t, 23)}, kSums);
  expect_parity(
      "layer_norm last two dims, no affine",
      [](const Inputs& v) {
        return Outputs{layer_norm(v[0] * 5.0 + 2.0, {6, 9})};
      },
      {normal_input({4, 6, 9}, t, 24)}, kSums);
  expect_parity(
      "layer_norm of a transposed input",
      [](const Inputs& v) { return Outputs{layer_norm(v[0].t(), {33}, v[1], Tensor(), 1e-3)}; },
      {normal_input({33, 10}, t, 25), normal_input({33}, t, 26)}, kSums);
}

class CudaIndex : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaIndex);

TEST_P(CudaIndex, Embedding) {
  const DType t = dtype();
  // Repeated ids: the weight gradient adds several rows into one (index_add).
  Tensor w = normal_input({50, 33}, t, 31);
  Tensor ids = index_input({4, 100}, 50, 32);
  expect_parity(
      "embedding", [](const Inputs& v) { return Outputs{embedding(v[0], v[1])}; }, {w, ids}, tolerances(kExact, kSums));
  expect_parity(
      "embedding padding_idx 7", [](const Inputs& v) { return Outputs{embedding(v[0], v[1], 7)}; },
      {w, index_input({300}, 10, 33)}, tolerances(kExact, kSums));
  expect_parity(
      "embedding of one id", [](const Inputs& v) { return Outputs{embedding(v[0], v[1])}; },
      {w, index_input({1}, 50, 34)}, kExact);
  // Many ids hitting few rows: the accumulation order differs most here.
  expect_parity(
      "embedding with heavy repetition", [](const Inputs& v) { return Outputs{embedding(v[0], v[1])}; },
      {normal_input({3, 256}, t, 35), index_input({5000}, 3, 36)}, tolerances(kExact, kSums));
}

TEST_P(CudaIndex, Gather) {
  const DType t = dtype();
  Tensor x = normal_input({6, 40}, t, 41);
  expect_parity(
      "gather dim 1", [](const Inputs& v) { return Outputs{gather(v[0], 1, v[1])}; }, {x, index_input({6, 75}, 40, 42)},
      tolerances(kExact, kSums));
  expect_parity(
      "gather dim 0", [](const Inputs& v) { return Outputs{gather(v[0], 0, v[1])}; }, {x, index_input({9, 40}, 6, 43)},
      tolerances(kExact, kSums));
  expect_parity(
      "gather 3-D middle dim", [](const Inputs& v) { return Outputs{gather(v[0], 1, v[1])}; },
      {normal_input({3, 8, 5}, t, 44), index_input({3, 4, 5}, 8, 45)}, tolerances(kExact, kSums));
}

class CudaNn : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaNn);

TEST_P(CudaNn, Dropout) {
  const DType t = dtype();
  // The mask comes from rand() with the given generator: Philox is counter-based and the uniform
  // is computed in f64 then rounded on both devices (core/cpu/elementwise.cpp), so the same seed
  // gives the same mask bit for bit; compare it exactly, and the scaled values pointwise.
  for (double p : {0.1, 0.5, 0.9}) {
    std::string name = "dropout p=" + std::to_string(p);
    expect_parity(
        name,
        [p](const Inputs& v) {
          Generator g(1234);
          g.advance(77);  // a nonzero offset
          Tensor y = dropout(v[0], p, true, &g);
          return Outputs{y, eq(y, 0.0)};
        },
        {uniform_input({37, 129}, t, 51, 0.5, 1.5)}, kPointwise);
  }
  expect_parity(
      "dropout eval is the identity", [](const Inputs& v) { return Outputs{dropout(v[0], 0.5, false)}; },
      {normal_input({5, 5}, t, 52)}, kExact);
  expect_parity(
      "dropout p=1", [](const Inputs& v) { return Outputs{dropout(v[0], 1.0, true)}; }, {normal_input({5, 5}, t, 53)},
      kExact);
  // The default generator: reseeded identically before each device's run.
  expect_parity(
      "dropout with the default generator",
      [](const Inputs& v) {
        manual_seed(99);
        return Outputs{dropout(v[0], 0.3, true)};
      },
      {uniform_input({1000}, t, 54, 0.5, 1.5)}, kPointwise);
}

TEST_P(CudaNn, CatStack) {
  const DType t = dtype();
  Inputs in{normal_input({2, 3, 4}, t, 61), normal_input({2, 5, 4}, t, 62), normal_input({2, 1, 4}, t, 63)};
  expect_parity(
      "cat dim 1",
      [](const Inputs& v) {
        return Outputs{cat({v[0], v[1], v[2]}, 1)};
      },
      in, kExact);
  expect_parity(
      "cat dim -1 of views",
      [](const Inputs& v) {
        return Outputs{cat({v[0].transpose(1, 2), v[1].transpose(1, 2)}, -1)};
      },
      in, kExact);
  expect_parity(
      "cat dim 0, one tensor used twice",
      [](const Inputs& v) {
        return Outputs{cat({v[0], v[0] * 2.0}, 0)};
      },
      in, kPointwise);
  Inputs same{normal_input({3, 4}, t, 64), normal_input({3, 4}, t, 65), normal_input({3, 4}, t, 66)};
  for (int64_t d : {0, 1, 2, -1})
    expect_parity(
        "stack dim " + std::to_string(d),
        [d](const Inputs& v) {
          return Outputs{stack({v[0], v[1], v[2]}, d)};
        },
        same, kExact);
  expect_parity(
      "cat of i64",
      [](const Inputs& v) {
        return Outputs{cat({v[0], v[1]}, 0)};
      },
      {index_input({3, 2}, 100, 67), index_input({4, 2}, 100, 68)}, kExact);
}

TEST_P(CudaNn, LstmCell) {
  const DType t = dtype();
  const int64_t b = 5, in = 20, hs = 32;
  Inputs with_bias{normal_input({b, in}, t, 71),      normal_input({b, hs}, t, 72),      normal_input({b, hs}, t, 73),
                   normal_input({4 * hs, in}, t, 74), normal_input({4 * hs, hs}, t, 75), normal_input({4 * hs}, t, 76),
                   normal_input({4 * hs}, t, 77)};
  expect_parity(
      "lstm_cell",
      [](const Inputs& v) {
        LstmState s = lstm_cell(v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
        return Outputs{s.h, s.c};
      },
      with_bias, kSums);
  expect_parity(
      "lstm_cell without biases",
      [](const Inputs& v) {
        LstmState s = lstm_cell(v[0], v[1], v[2], v[3], v[4]);
        return Outputs{s.h, s.c};
      },
      with_bias, kSums);
  // Two steps: the second consumes the first's state, so gradients flow through the recurrence.
  expect_parity(
      "lstm_cell two steps",
      [](const Inputs& v) {
        LstmState s = lstm_cell(v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
        s = lstm_cell(v[0] * 0.5, s.h, s.c, v[3], v[4], v[5], v[6]);
        return Outputs{s.h};
      },
      with_bias, kSums);
}

}  // namespace
}  // namespace octet
