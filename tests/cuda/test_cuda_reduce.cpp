// CUDA against CPU: reductions of core/ops/reduce.h over inner, outer, several and all dims
// (short and long rows), max/min with indices, argmax/argmin; softmax, log-softmax and the losses
// of core/ops/loss.h (cross-entropy with ignore_index, label smoothing and every reduction).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/octet.h"
#include "tests/cuda/parity.h"

namespace octet {
namespace {

using testing::expect_parity;
using testing::index_input;
using testing::Inputs;
using testing::kExact;
using testing::kSums;
using testing::normal_input;
using testing::Outputs;
using testing::tolerances;
using testing::uniform_input;

class CudaReduce : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaReduce);

std::string dims_str(const std::vector<int64_t>& dims, bool keepdim) {
  std::ostringstream os;
  os << "dims " << dims << (keepdim ? " keepdim" : "");
  return os.str();
}

// Dim lists over [A, B, C]: the inner dim (rows), an outer dim, the middle, two dims, all.
const std::vector<std::vector<int64_t>> kDimSets = {{2}, {0}, {1}, {0, 2}, {-1, 0}, {}};

TEST_P(CudaReduce, SumMeanVar) {
  const DType t = dtype();
  for (const Shape& shape : {Shape{3, 5, 7}, Shape{2, 3, 4097}, Shape{1500, 2, 3}}) {
    Inputs in{uniform_input(shape, t, 1)};
    std::string s = ::testing::PrintToString(shape) + " ";
    for (const auto& dims : kDimSets)
      for (bool keep : {false, true}) {
        std::string d = s + dims_str(dims, keep);
        expect_parity(
            "sum " + d, [&](const Inputs& v) { return Outputs{sum(v[0], dims, keep)}; }, in, kSums);
        expect_parity(
            "mean " + d, [&](const Inputs& v) { return Outputs{mean(v[0], dims, keep)}; }, in, kSums);
        expect_parity(
            "var " + d, [&](const Inputs& v) { return Outputs{var(v[0], dims, 1, keep)}; }, in, kSums);
      }
    expect_parity(
        s + "var correction 0", [](const Inputs& v) { return Outputs{var(v[0], {1}, 0)}; }, in, kSums);
    expect_parity(
        s + "sum of a transposed view", [](const Inputs& v) { return Outputs{sum(v[0].transpose(0, 2), {0})}; }, in,
        kSums);
  }
}

TEST_P(CudaReduce, NormAndLogsumexp) {
  const DType t = dtype();
  Inputs in{uniform_input({4, 6, 300}, t, 2, -2, 2)};
  for (double p : {1.0, 2.0, 3.0, 0.5, std::numeric_limits<double>::infinity()})
    for (const auto& dims : kDimSets) {
      std::string d = "norm p=" + std::to_string(p) + " " + dims_str(dims, false);
      expect_parity(
          d, [&](const Inputs& v) { return Outputs{norm(v[0], p, dims)}; }, in, kSums);
    }
  expect_parity(
      "norm keepdim", [](const Inputs& v) { return Outputs{norm(v[0], 2.0, {1}, true)}; }, in, kSums);
  for (const auto& dims : kDimSets) {
    if (dims.empty()) continue;  // logsumexp takes explicit dims
    expect_parity(
        "logsumexp " + dims_str(dims, false), [&](const Inputs& v) { return Outputs{logsumexp(v[0], dims)}; }, in,
        kSums);
  }
  // Large magnitudes: the max-shift must keep it finite on both devices.
  expect_parity(
      "logsumexp of large values", [](const Inputs& v) { return Outputs{logsumexp(v[0] * 300.0, {2}, true)}; }, in,
      kSums);
}

TEST_P(CudaReduce, MaxMinArg) {
  const DType t = dtype();
  // Continuous values (no ties) and small integers (many ties: the first extreme must win).
  for (bool ties : {false, true}) {
    for (const Shape& shape : {Shape{4, 5, 6}, Shape{3, 5000}, Shape{2000, 3}}) {
      Tensor x = ties ? index_input(shape, 5, 3).to(t).requires_grad_(true) : normal_input(shape, t, 4);
      std::string s = ::testing::PrintToString(shape) + (ties ? " with ties " : " ");
      Inputs in{x};
      expect_parity(
          s + "max/min of all",
          [](const Inputs& v) {
            return Outputs{max(v[0]), min(v[0])};
          },
          in, tolerances(kExact, kSums));
      for (int64_t d = -1; d < static_cast<int64_t>(shape.size()); ++d) {
        std::string n = s + "dim " + std::to_string(d);
        expect_parity(
            "max " + n,
            [d](const Inputs& v) {
              ValuesIndices r = max(v[0], d);
              return Outputs{r.values, r.indices};
            },
            in, tolerances(kExact, kSums));
        expect_parity(
            "min keepdim " + n,
            [d](const Inputs& v) {
              ValuesIndices r = min(v[0], d, true);
              return Outputs{r.values, r.indices};
            },
            in, tolerances(kExact, kSums));
        expect_parity(
            "argmax/argmin " + n,
            [d](const Inputs& v) {
              return Outputs{argmax(v[0], d), argmin(v[0], d, true)};
            },
            in, kExact);
      }
    }
  }
}

TEST_P(CudaReduce, NanAndInfinity) {
  // The first NaN of a row wins max/min/argmax on both devices; sums and softmax of a row with a
  // NaN are NaN; rows with infinities give whatever the CPU gives (the max shift makes a +inf
  // logit's softmax row NaN there).
  const DType t = dtype();
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Tensor x = normal_input({6, 2000}, DType::f64, 8, false);
  {
    NoGradGuard ng;
    std::vector<double> v = x.to_vector<double>();
    v[1 * 2000 + 17] = nan;
    v[1 * 2000 + 1500] = nan;
    v[2 * 2000 + 3] = inf;
    v[3 * 2000 + 1999] = -inf;
    v[4 * 2000 + 5] = inf;
    v[4 * 2000 + 900] = nan;
    x = from_vector<double>(v, {6, 2000}).to(t);
  }
  expect_parity(
      "reductions of rows with NaN and infinities",
      [](const Inputs& in) {
        const Tensor& a = in[0];
        ValuesIndices mx = max(a, 1), mn = min(a, 1);
        return Outputs{mx.values,     mx.indices,        mn.values,         mn.indices,       argmax(a, 1),
                       argmin(a, 1),  sum(a, {1}),       mean(a, {1}),      max(a),           min(a),
                       softmax(a, 1), log_softmax(a, 1), logsumexp(a, {1}), max(a, 0).indices};
      },
      {x}, kSums);
}

// Integer reductions are exact, whatever the order; no floating dtype to vary, so one test.
class CudaReduceIntegers : public testing::CudaParityTest {};

TEST_F(CudaReduceIntegers, Sums) {
  for (DType it : {DType::i32, DType::i64}) {
    Tensor x = index_input({30, 1001}, 1000, 5).to(it);
    expect_parity(
        std::string(dtype_name(it)) + " sum/max/min/argmax",
        [](const Inputs& v) {
          return Outputs{sum(v[0], {1}), sum(v[0], {0}), sum(v[0]), max(v[0], 1).values, min(v[0]), argmax(v[0], 0)};
        },
        {x}, kExact);
  }
}

TEST_P(CudaReduce, SoftmaxAndLogSoftmax) {
  const DType t = dtype();
  for (const Shape& shape : {Shape{3, 4, 5}, Shape{8, 1000}, Shape{1000, 3}, Shape{2, 5000}}) {
    Inputs in{normal_input(shape, t, 6)};
    for (int64_t d = -1; d < static_cast<int64_t>(shape.size()); ++d) {
      std::string n = ::testing::PrintToString(shape) + " dim " + std::to_string(d);
      expect_parity(
          "softmax " + n, [d](const Inputs& v) { return Outputs{softmax(v[0], d)}; }, in, kSums);
      expect_parity(
          "log_softmax " + n, [d](const Inputs& v) { return Outputs{log_softmax(v[0], d)}; }, in, kSums);
      // Logits of size ~50: without the max shift, exp overflows in f32.
      expect_parity(
          "softmax of large logits " + n, [d](const Inputs& v) { return Outputs{softmax(v[0] * 50.0, d)}; }, in, kSums);
    }
  }
  // Masked logits (-inf), as attention uses them: zero probability, finite gradients elsewhere.
  Tensor mask = gt(uniform_input({6, 40}, t, 7, 0, 1, false), 0.7);
  expect_parity(
      "masked softmax",
      [mask](const Inputs& v) {
        Tensor m = mask.to(v[0].device());
        Tensor x = where(
            m, full({}, -std::numeric_limits<double>::infinity(), TensorOptions(v[0].dtype()).device(v[0].device())),
            v[0]);
        return Outputs{softmax(x, 1)};
      },
      {normal_input({6, 40}, t, 8)}, kSums);
}

class CudaLoss : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaLoss);

TEST_P(CudaLoss, CrossEntropy) {
  const DType t = dtype();
  const int64_t n = 64, c = 37;
  Tensor logits = normal_input({n, c}, t, 11);
  Tensor target = index_input({n}, c, 12);
  // Some targets ignored with the default ignore_index.
  Tensor ignored =
      where(lt(uniform_input({n}, DType::f64, 13, 0, 1, false), 0.2), full({n}, -100.0, DType::i64), target);
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none})
    for (double eps : {0.0, 0.1}) {
      std::string name =
          "cross_entropy reduction " + std::to_string(static_cast<int>(r)) + " smoothing " + std::to_string(eps);
      auto opts = CrossEntropyOptions().reduction(r).label_smoothing(eps);
      expect_parity(
          name, [opts](const Inputs& v) { return Outputs{cross_entropy(v[0], v[1], opts)}; }, {logits, target}, kSums);
      expect_parity(
          name + " ignore_index -100", [opts](const Inputs& v) { return Outputs{cross_entropy(v[0], v[1], opts)}; },
          {logits, ignored}, kSums);
      // A class index as ignore_index: every row of that class is left out.
      auto opts3 = CrossEntropyOptions(opts).ignore_index(3);
      expect_parity(
          name + " ignore_index 3", [opts3](const Inputs& v) { return Outputs{cross_entropy(v[0], v[1], opts3)}; },
          {logits, index_input({n}, 5, 14)}, kSums);
    }
  // Non-contiguous logits (a transposed [C, N] tensor).
  expect_parity(
      "cross_entropy of transposed logits", [](const Inputs& v) { return Outputs{cross_entropy(v[0].t(), v[1])}; },
      {normal_input({c, n}, t, 15), target}, kSums);
}

TEST_P(CudaLoss, NllAndMse) {
  const DType t = dtype();
  Tensor logits = normal_input({20, 9}, t, 21);
  Tensor target = where(lt(uniform_input({20}, DType::f64, 22, 0, 1, false), 0.25), full({20}, -100.0, DType::i64),
                        index_input({20}, 9, 23));
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none})
    expect_parity(
        "nll_loss reduction " + std::to_string(static_cast<int>(r)),
        [r](const Inputs& v) { return Outputs{nll_loss(log_softmax(v[0], 1), v[1], -100, r)}; }, {logits, target},
        kSums);
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none})
    expect_parity(
        "mse_loss reduction " + std::to_string(static_cast<int>(r)),
        [r](const Inputs& v) { return Outputs{mse_loss(v[0], v[1], r)}; },
        {normal_input({7, 300}, t, 24), normal_input({7, 300}, t, 25)}, kSums);
}

}  // namespace
}  // namespace octet
