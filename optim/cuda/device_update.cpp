// The CUDA versions of optim/'s kernels (optim/cuda/kernels.h): finds the device memory of a
// parameter's state -- a DenseState's buffers, a BlockwiseState's codes and absmax, or a
// LowBitState's packed codes and scales, the layouts the kernels of optim/cuda/update.h know --
// and launches the kernels on the current stream. A layer-wise update leaves its factor in a
// one-element device tensor that its update kernel reads, so no update waits for the device.
// Built with OCTET_CUDA only.
#include <algorithm>
#include <array>
#include <type_traits>
#include <vector>

#include "core/cuda/kernels.h"
#include "core/exact_sum.h"
#include "optim/blockwise_state.h"
#include "optim/cuda/kernels.h"
#include "optim/cuda/update.h"
#include "optim/lowbit_state.h"
#include "quant/cuda/blockwise.h"

namespace octet {
namespace {

static_assert(quant::kMaxBlockSize <= cuda::kMaxQuantBlock, "the 8-bit kernels cover every block size");

// Kernels run on the device of their tensors: the returned guard makes it current for the scope
// (declare it first, so the scratch tensors of the scope are freed before it restores the device).
[[nodiscard]] cuda::DeviceGuard on_device_of(const Tensor& param) {
  OCTET_CHECK(param.device().is_cuda(), "optimizer: no kernels for a parameter on ", param.device());
  return cuda::DeviceGuard(param.device().index);  // guaranteed elision: the guard is neither copied nor moved
}

void check_on(const Tensor& t, const Tensor& param, const char* name, const char* what) {
  OCTET_CHECK(t.device() == param.device() && t.is_contiguous(), name, ": ", what, " is on ", t.device(),
              t.is_contiguous() ? "" : " (not contiguous)", ", expected contiguous on ", param.device());
}

template <typename T>
cuda::DenseView<T> dense_view(const DenseState& state, const Tensor& param, const char* name) {
  const size_t count = state.buffer_names().size();
  OCTET_CHECK(count <= static_cast<size_t>(kMaxStateBuffers), name, ": ", count,
              " state buffers (the kernels take at most ", kMaxStateBuffers, ")");
  cuda::DenseView<T> v;
  v.count = static_cast<int>(count);
  for (size_t i = 0; i < count; ++i) {
    const Tensor& b = state.buffer(i);
    check_on(b, param, name, "a state buffer");
    OCTET_CHECK(b.numel() == param.numel(), name, ": a state buffer of ", b.numel(), " elements for a parameter of ",
                param.numel());
    v.buf[i] = b.data<T>();
  }
  return v;
}

cuda::QuantView quant_view(const BlockwiseState& state, const Tensor& param, const char* name) {
  const size_t count = state.buffer_names().size();
  OCTET_CHECK(count >= 1 && count <= static_cast<size_t>(kMaxStateBuffers), name, ": ", count,
              " 8-bit state buffers (the kernels take 1 to ", kMaxStateBuffers, ")");
  cuda::QuantView v;
  v.count = static_cast<int>(count);
  v.block_size = state.block_size();
  for (size_t i = 0; i < count; ++i) {
    const quant::BlockwiseQuantized& q = state.buffer(i);
    check_on(q.codes, param, name, "8-bit state codes");
    check_on(q.absmax, param, name, "8-bit state absmax");
    OCTET_CHECK(q.codes.numel() == param.numel() && q.block_size == state.block_size() &&
                    q.absmax.numel() == quant::num_blocks(param.numel(), q.block_size),
                name, ": 8-bit state of ", q.codes.numel(), " codes and ", q.absmax.numel(),
                " blocks for a parameter of ", param.numel());
    v.codes[i] = q.codes.data<uint8_t>();
    v.absmax[i] = q.absmax.data<float>();
    v.tables[i] = quant::cuda::device_tables(q.map, param.device().index);
  }
  return v;
}

// A 4-bit state's rank-1 scratch for one update: per buffer, the new values and the new maxima
// (at 0). It must outlive the kernels' launch (the stream orders the memory's reuse).
struct LowBitScratch {
  std::vector<Tensor> fresh;
  std::vector<std::vector<Tensor>> new_maxima;
};

// The device view of a 4-bit state, with its rank-1 buffers' scratch made into `scratch` (none
// for a pass that only reads the state: with_scratch false).
cuda::LowBitView lowbit_view(const LowBitState& state, const Tensor& param, const char* name, LowBitScratch& scratch,
                             bool with_scratch = true) {
  const size_t count = state.buffer_names().size();
  OCTET_CHECK(count >= 1 && count <= static_cast<size_t>(kMaxStateBuffers), name, ": ", count,
              " 4-bit state buffers (the kernels take 1 to ", kMaxStateBuffers, ")");
  const Shape& dims = state.rank1_shape();
  cuda::LowBitView v;
  v.count = static_cast<int>(count);
  v.offset = state.offset();
  scratch.fresh.resize(count);
  scratch.new_maxima.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const LowBitState::Buffer& b = state.buffer(i);
    check_on(b.codes, param, name, "4-bit state codes");
    v.codes[i] = b.codes.data<uint8_t>();
    std::copy_n(quant::quant_map4(b.map).data(), 16, v.map[i]);
    std::copy_n(quant::quant_thresholds4(b.map).data(), 15, v.thresholds[i]);
    if (!b.rank1) {
      check_on(b.absmax, param, name, "4-bit state absmax");
      v.absmax[i] = b.absmax.data<float>();
      continue;
    }
    OCTET_CHECK(dims.size() <= static_cast<size_t>(cuda::kMaxRank1Dims), name, ": rank-1 over ", dims.size(),
                " dims (the kernels take at most ", cuda::kMaxRank1Dims, ")");
    v.dims = static_cast<int>(dims.size());
    if (with_scratch) {
      scratch.fresh[i] = empty({param.numel()}, TensorOptions(param.device()));
      v.fresh[i] = scratch.fresh[i].data<float>();
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      v.extents[d] = dims[d];
      check_on(b.maxima[d], param, name, "4-bit state maxima");
      v.maxima[i][d] = b.maxima[d].data<float>();
      if (!with_scratch) continue;
      scratch.new_maxima[i].push_back(zeros({dims[d]}, TensorOptions(param.device())));
      v.new_maxima[i][d] = scratch.new_maxima[i].back().data<float>();
    }
  }
  return v;
}

// `rule` over a 4-bit state: the fused update, the rank-1 buffers' new maxima made the whole
// parameter's (a sharded state's: a collective), then their codes from their new values and
// maxima, which then replace the old maxima.
template <typename Rule>
void lowbit_update(const Rule& rule, float* p, const float* g, const Tensor& param, LowBitState& state,
                   const char* name, const float* scale) {
  LowBitScratch scratch;
  cuda::LowBitView v = lowbit_view(state, param, name, scratch);
  cuda::lowbit_update(rule, p, g, param.numel(), v, scale);
  if (v.dims == 0) return;
  std::vector<Tensor> maxima;  // of every rank-1 buffer, end to end
  for (const std::vector<Tensor>& m : scratch.new_maxima) maxima.insert(maxima.end(), m.begin(), m.end());
  state.merge_maxima(maxima);
  for (size_t i = 0, next = 0; i < scratch.new_maxima.size(); ++i) {
    for (size_t d = 0; d < scratch.new_maxima[i].size(); ++d) {
      scratch.new_maxima[i][d] = maxima[next++];  // the merged ones, where the state is sharded
      v.new_maxima[i][d] = scratch.new_maxima[i][d].data<float>();
    }
  }
  cuda::lowbit_encode_rank1(v, param.numel());
  for (size_t i = 0; i < scratch.new_maxima.size(); ++i) {
    for (size_t d = 0; d < scratch.new_maxima[i].size(); ++d) {
      Tensor live = state.buffer(i).maxima[d];  // a handle: the copy lands in the state
      live.copy_(scratch.new_maxima[i][d]);
    }
  }
}

// Calls dense(DenseView<T>) or blockwise(QuantView) by the kind of `state`.
template <typename T, typename Dense, typename Blockwise>
void with_state(ParamState& state, const Tensor& param, const char* name, Dense dense, Blockwise blockwise) {
  if (auto* d = dynamic_cast<DenseState*>(&state)) return dense(dense_view<T>(*d, param, name));
  if (auto* q = dynamic_cast<BlockwiseState*>(&state)) {
    if constexpr (std::is_same_v<T, float>) {
      return blockwise(quant_view(*q, param, name));
    } else {
      OCTET_FAIL(name, ": 8-bit state holds f32 parameters only");
    }
  }
  OCTET_FAIL(name, ": the state of a parameter on ", param.device(),
             " must be a DenseState, a BlockwiseState or a LowBitState (other state kinds run on the CPU only)");
}

// A one-element device tensor for a layer-wise factor, and scratch for the partial sums.
Tensor device_scalar(DType dtype, const Tensor& param) {
  return empty({1}, TensorOptions(dtype).device(param.device()));
}
// A zeroed accumulator of `terms` exact sums (cuda::kExactWords int64 each) on param's device.
Tensor exact_accumulator(int terms, const Tensor& param) {
  return zeros({terms * cuda::kExactWords}, TensorOptions(DType::i64).device(param.device()));
}

template <typename Rule, typename T = typename Rule::Scalar>
void launch_update(const Rule& rule, const Tensor& param, const Tensor& grad, ParamState& state, const char* name,
                   const T* scale) {
  check_on(grad, param, name, "the gradient");
  T* p = param.data<T>();
  const T* g = grad.data<T>();
  const int64_t n = param.numel();
  if (auto* lb = dynamic_cast<LowBitState*>(&state)) {
    if constexpr (std::is_same_v<T, float>) {
      return lowbit_update(rule, p, g, param, *lb, name, scale);
    } else {
      OCTET_FAIL(name, ": 4-bit state holds f32 parameters only");
    }
  }
  with_state<T>(
      state, param, name, [&](const cuda::DenseView<T>& v) { cuda::dense_update(rule, p, g, n, v, scale); },
      [&](const cuda::QuantView& v) {
        if constexpr (std::is_same_v<T, float>) cuda::blockwise_update(rule, p, g, n, v, scale);
      });
}

// LAMB's pass 1 on the parameter's device (current): ||p||^2 and ||u||^2, exactly.
template <typename T>
Tensor lamb_exact_sums_of(const LambRule<T>& rule, const Tensor& param, const Tensor& grad, ParamState& state) {
  const char* name = "Lamb";
  check_on(grad, param, name, "the gradient");
  const int64_t n = param.numel();
  Tensor acc = exact_accumulator(2, param);
  const T* p = param.data<T>();
  const T* g = grad.data<T>();
  int64_t* a = acc.data<int64_t>();
  if (auto* lb = dynamic_cast<LowBitState*>(&state)) {
    if constexpr (std::is_same_v<T, float>) {
      LowBitScratch unused;  // the read pass writes nothing
      cuda::lamb_exact_sums(rule, p, g, n, lowbit_view(*lb, param, name, unused, /*with_scratch=*/false), a);
      return acc;
    } else {
      OCTET_FAIL(name, ": 4-bit state holds f32 parameters only");
    }
  }
  with_state<T>(
      state, param, name, [&](const cuda::DenseView<T>& v) { cuda::lamb_exact_sums(rule, p, g, n, v, a); },
      [&](const cuda::QuantView& v) {
        if constexpr (std::is_same_v<T, float>) cuda::lamb_exact_sums(rule, p, g, n, v, a);
      });
  return acc;
}

}  // namespace

namespace optim::cuda {

template <typename Rule>
void rule_update(const Rule& rule, const Tensor& param, const Tensor& grad, ParamState& state, const char* name) {
  const auto guard = on_device_of(param);
  launch_update(rule, param, grad, state, name, static_cast<const typename Rule::Scalar*>(nullptr));
}

template <typename T>
void lamb_update(const LambRule<T>& rule, double lr, bool trust_clip, const Tensor& param, const Tensor& grad,
                 ParamState& state) {
  const auto guard = on_device_of(param);
  const Tensor acc = lamb_exact_sums_of(rule, param, grad, state);
  Tensor step = device_scalar(param.dtype(), param);
  octet::cuda::lamb_finish(acc.data<int64_t>(), lr, trust_clip, step.data<T>());
  launch_update(rule, param, grad, state, "Lamb", static_cast<const T*>(step.data<T>()));
}

namespace {
// An accumulator of `terms` exact sums read back: the first passes of a sharded layer-wise step,
// whose sums are then added over the ranks.
template <size_t K>
std::array<ExactSum, K> host_sums(const Tensor& acc) {
  const Tensor host = acc.to(Device::cpu());
  const int64_t* words = host.data<int64_t>();
  std::array<ExactSum, K> out;
  for (size_t k = 0; k < K; ++k)
    out[k] =
        ExactSum::from_words({words + k * octet::cuda::kExactWords, static_cast<size_t>(octet::cuda::kExactWords)});
  return out;
}
}  // namespace

template <typename T>
LayerSums lamb_sums(const LambRule<T>& rule, const Tensor& param, const Tensor& grad, ParamState& state) {
  const auto guard = on_device_of(param);
  return host_sums<2>(lamb_exact_sums_of(rule, param, grad, state));
}

LayerSums lars_sums(const Tensor& param, const Tensor& grad) {
  const auto guard = on_device_of(param);
  check_on(grad, param, "LARS", "the gradient");
  Tensor acc = exact_accumulator(2, param);
  dispatch_float(param.dtype(), "LARS", [&]<typename T>() {
    octet::cuda::square_pair_exact_sums(param.data<T>(), grad.data<T>(), param.numel(), acc.data<int64_t>());
  });
  return host_sums<2>(acc);
}

template <typename T>
void lars_update(const LarsRule<T>& rule, double trust_coefficient, double weight_decay, double eps,
                 const Tensor& param, const Tensor& grad, ParamState& state) {
  const char* name = "LARS";
  const auto guard = on_device_of(param);
  check_on(grad, param, name, "the gradient");
  Tensor acc = exact_accumulator(2, param), scale = device_scalar(param.dtype(), param);
  octet::cuda::square_pair_exact_sums(param.data<T>(), grad.data<T>(), param.numel(), acc.data<int64_t>());
  octet::cuda::lars_finish(acc.data<int64_t>(), trust_coefficient, weight_decay, eps, scale.data<T>());
  launch_update(rule, param, grad, state, name, static_cast<const T*>(scale.data<T>()));
}

ExactSum sum_squares(const std::vector<Tensor>& xs) {
  if (xs.empty()) return {};
  const Tensor& first = xs.front();
  const auto guard = on_device_of(first);
  // Every tensor's squares into one accumulator (exact: as the CPU's sum of the tensors' sums),
  // whose digits hold up to 2^31 units in all.
  Tensor acc = exact_accumulator(1, first);
  int64_t units = 0;
  for (const Tensor& x : xs) {
    OCTET_CHECK(x.device() == first.device(), "sum of squares: tensors on ", first.device(), " and ", x.device());
    units += (x.numel() + kSumUnit - 1) / kSumUnit;
    OCTET_CHECK(units < (int64_t{1} << 31), "sum of squares: more than 2^37 elements");
    Tensor c = x.contiguous();
    dispatch_float(c.dtype(), "sum of squares",
                   [&]<typename T>() { octet::cuda::square_exact_sums(c.data<T>(), c.numel(), acc.data<int64_t>()); });
  }
  return host_sums<1>(acc)[0];  // the one host synchronization
}

OCTET_OPTIM_INSTANTIATE_KERNELS()

}  // namespace optim::cuda
}  // namespace octet
