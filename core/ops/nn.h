// Neural-network building blocks, forward and backward: indexing, embedding, dropout,
// normalization, concatenation and the LSTM cell.
//   Tensor e = embedding(weight, ids);        Tensor y = layer_norm(x, {512}, w, b);
//   auto [h1, c1] = lstm_cell(x, h0, c0, w_ih, w_hh, b_ih, b_hh);
#pragma once

#include <vector>

#include "core/norm_act.h"
#include "core/tensor.h"

namespace octet {

class Generator;

// out[i][j] = x[i][index[i][j]] along `dim` (index i64, same rank; other dims equal to x's).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// Rows of weight [V, D] picked by ids (i64, any shape) -> [..., D]. Rows equal to padding_idx
// (if >= 0) get no gradient.
Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx = -1);
// Zeroes elements with probability p and scales the rest by 1/(1-p) while training. x's batch
// runs along `batch_dim` (1 for time-major sequences [T, B, ...]).
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr, int64_t batch_dim = 0);

// Data-parallel training: this process holds block `rank` of `count` equal blocks of each global
// batch. While one is set (DropoutShardGuard; the trainer sets it under several processes), dropout
// draws the mask of the whole global batch and keeps this process's block, so every example gets
// the mask one process would give it and the ranks' masks differ. Every rank draws the same
// numbers, so the generators stay alike and a run follows the one-process run, dropout on.
struct DropoutShard {
  int rank = 0, count = 1;
};
DropoutShard dropout_shard();
class DropoutShardGuard {
 public:
  explicit DropoutShardGuard(DropoutShard s);
  ~DropoutShardGuard();
  DropoutShardGuard(const DropoutShardGuard&) = delete;
  DropoutShardGuard& operator=(const DropoutShardGuard&) = delete;

 private:
  DropoutShard previous_;
};
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);

// Normalizes over the trailing `normalized_shape` dims; weight/bias (optional) have that shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// x [N, C, ...]. In training, normalizes with the batch statistics and updates running_mean /
// running_var in place (if defined): r = (1 - momentum) r + momentum * stat, with the unbiased
// variance, as PyTorch. In evaluation, normalizes with the running statistics.
// `act` relu/relu6: relu(batch_norm(...)) / relu6(...) in one op, the same bits; in training it
// keeps no activation for the backward (core/norm_act.h), so a following INT8 convolution's float
// input is freed after its forward. `residual` (x's shape): act(batch_norm(...) + residual) in one
// op, the same bits (the residual blocks of ResNet and MobileNetV2); its backward keeps the
// residual only where an activation follows.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5,
                  NormActivation act = NormActivation::none, const Tensor& residual = Tensor());

// Pieces of batch_norm's training path, for an op that fuses batch norm with its consumer (the
// INT8 convolution's fused quantize, quant/int8_conv.h) and must give batch_norm's bits:
// running_mean / running_var (both defined, or nothing happens) from the batch mean and invstd
// over `count` values per channel, as batch_norm updates them;
void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                               const Tensor& invstd, int64_t count, double momentum, double eps);
// and the backward of act(batch_norm(x)) from its output gradient dout [N, C, S] (contiguous), x as
// [N, C, S] and the saved mean and invstd: dout masked by the activation (dout itself for none),
// and the gradients asked for (undefined otherwise).
struct BatchNormGrads {
  Tensor dout, dx, dweight, dbias;
};
BatchNormGrads batch_norm_act_backward(const Tensor& dout, const Tensor& x3, const Tensor& weight, const Tensor& bias,
                                       const Tensor& mean, const Tensor& invstd, NormActivation act, bool want_dx,
                                       bool want_dweight, bool want_dbias);

struct LstmState {
  Tensor h;
  Tensor c;
};
// One LSTM step (PyTorch's gate order i, f, g, o): x [B, I], h, c [B, H], w_ih [4H, I],
// w_hh [4H, H], biases [4H] (optional).
LstmState lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih, const Tensor& w_hh,
                    const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

}  // namespace octet
