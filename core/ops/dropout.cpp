#include "core/ops/dropout.h"

#include "core/generator.h"
#include "core/ops/elementwise.h"

namespace octet {

namespace {
DropoutShard& current_dropout_shard() {
  static DropoutShard shard;
  return shard;
}
}  // namespace

DropoutShard dropout_shard() { return current_dropout_shard(); }
DropoutShardGuard::DropoutShardGuard(DropoutShard s) : previous_(current_dropout_shard()) {
  OCTET_CHECK(s.count >= 1 && s.rank >= 0 && s.rank < s.count, "DropoutShard: expected rank in [0, count), got rank ",
              s.rank, " of ", s.count);
  current_dropout_shard() = s;
}
DropoutShardGuard::~DropoutShardGuard() { current_dropout_shard() = previous_; }

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen, int64_t batch_dim) {
  OCTET_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * zeros_like(x);
  // bf16 activations draw the f32 path's numbers and scale in f32, rounding the product once.
  const TensorOptions opts = TensorOptions(opmath_dtype(x.dtype())).device(x.device());
  const DropoutShard shard = current_dropout_shard();
  Tensor u;
  if (shard.count == 1) {
    u = rand(x.shape(), opts, gen);
  } else {
    const int64_t d = wrap_dim(batch_dim, x.dim(), "dropout");
    Shape global = x.shape();
    global[d] *= shard.count;
    u = rand(global, opts, gen).narrow(d, shard.rank * x.size(d), x.size(d));
  }
  Tensor keep = lt(u, 1.0 - p).to(opts.dtype_);
  Tensor y = x * (keep * (1.0 / (1.0 - p)));
  return y.dtype() == x.dtype() ? y : y.to(x.dtype());
}

}  // namespace octet
