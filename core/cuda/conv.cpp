// CUDA 2-D convolution, NCHW, contiguous operands, f32 and f64, same semantics as cpu::conv2d_*.
// Depthwise convolutions (groups == C, K a multiple of C) run on our own kernels (depthwise.cu);
// everything else runs on cuDNN, with a bias add of our own after the forward.
//
// bf16 x and w (autocast's convolutions, core/autocast.h) run cuDNN's bf16 kernels (bf16 tensors,
// f32 accumulation: its PSEUDO_BFLOAT16 configuration, tensor cores allowed), which write bf16:
// the output, dx and dw come out rounded to bf16 (as PyTorch's autocast gives on CUDA) and are
// widened into the f32 tensors the op hands over, the bias added after in f32. The CPU keeps dx
// and dw in f32 and adds the bias before its one rounding: the devices agree to a bf16 unit.
// Depthwise layers and shapes cuDNN has no bf16 algorithm for run the f32 kernels on the widened
// operands.
//
// Which cuDNN API: the legacy convolution calls (cudnnConvolutionForward / BackwardData /
// BackwardFilter, algorithms from the cudnnGet*Algorithm_v7 heuristics). They are deprecated in
// cuDNN 9 but still shipped and supported, and they cover everything needed here (groups,
// dilation, f64, FMA-only math) in a handful of calls whose every argument can be checked against
// the header. The graph API that NVIDIA prefers needs about ten backend descriptors with attribute
// lists per operation plus engine-configuration selection: too much to get right without a GPU to
// test on. Moving later is local to this file.
//
// Algorithms are chosen once per shape (geometry, dtype, TF32 flag, device) and cached: the
// heuristic's fastest deterministic algorithm whose math is allowed (exact FP32 = CUDNN_FMA_MATH
// unless cuda::allow_tf32()) and whose workspace is at most 1 GiB. The workspace comes from the
// caching allocator. Shapes cuDNN cannot run (no algorithm, or a tensor beyond its 32-bit sizes
// even one sample at a time) fall back to the direct kernels; batches beyond 2^31 elements run in
// slices of samples.
//   cuda::conv2d_forward(geom, x, w, bias, out);   cuda::conv2d_backward(geom, x, w, dout, dx, dw);
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda.h"
#include "core/cuda/depthwise.h"
#include "core/cuda/kernels.h"
#include "core/cuda/libraries.h"
#include "core/kernel_checks.h"

namespace octet::cuda {

using kernels::check_conv_grads;
using kernels::check_conv_operands;

namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr size_t kMaxWorkspace = size_t{1} << 30;

enum Pass { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

// A cuDNN descriptor owned by this object.
template <typename D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)>
class Desc {
 public:
  Desc() { OCTET_CUDNN_CHECK(Create(&d_)); }
  ~Desc() { Destroy(d_); }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  D get() const { return d_; }

 private:
  D d_ = nullptr;
};
using TensorDesc = Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Desc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Desc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;

struct Algo {
  bool chosen = false;
  int algo = -1;  // -1: cuDNN has none for this shape (use the direct kernels)
  size_t workspace = 0;
};

// Descriptors and chosen algorithms of one shape. Each pass has its own convolution descriptor,
// since the math type is set to the one its algorithm was chosen with. Written only under the
// cache lock; a pass's fields do not change once chosen.
struct Plan {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv[3];
  Algo algo[3];
};

cudnnDataType_t cudnn_type(DType t) {
  if (t == DType::bf16) return CUDNN_DATA_BFLOAT16;
  return t == DType::f32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
}

// The convolution's compute type: f32 for bf16 tensors (PSEUDO_BFLOAT16_CONFIG), else the data's.
cudnnDataType_t compute_type(DType t) { return t == DType::bf16 ? CUDNN_DATA_FLOAT : cudnn_type(t); }

int to_int(int64_t v) { return static_cast<int>(v); }

std::unique_ptr<Plan> create_plan(const Conv2dGeometry& g, DType dtype, bool tf32) {
  auto plan = std::make_unique<Plan>();
  const cudnnDataType_t type = cudnn_type(dtype);
  OCTET_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->x.get(), CUDNN_TENSOR_NCHW, type, to_int(g.n), to_int(g.c),
                                               to_int(g.h), to_int(g.w)));
  OCTET_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan->w.get(), type, CUDNN_TENSOR_NCHW, to_int(g.k),
                                               to_int(g.c / g.groups), to_int(g.r), to_int(g.s)));
  // CUDNN_DEFAULT_MATH lets FP32 convolutions use TF32 tensor cores on Ampere and later;
  // CUDNN_FMA_MATH restricts them to FMA kernels, i.e. exact FP32.
  const cudnnMathType_t math = dtype == DType::f32 && !tf32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
  for (ConvDesc& conv : plan->conv) {
    OCTET_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv.get(), to_int(g.pad_h), to_int(g.pad_w), to_int(g.stride_h),
                                                      to_int(g.stride_w), to_int(g.dil_h), to_int(g.dil_w),
                                                      CUDNN_CROSS_CORRELATION, compute_type(dtype)));
    OCTET_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv.get(), to_int(g.groups)));
    OCTET_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), math));
  }
  int n = 0, k = 0, p = 0, q = 0;
  OCTET_CUDNN_CHECK(
      cudnnGetConvolution2dForwardOutputDim(plan->conv[0].get(), plan->x.get(), plan->w.get(), &n, &k, &p, &q));
  OCTET_CHECK(n == g.n && k == g.k && p == g.p && q == g.q, "conv2d: cuDNN computes an output of [", n, ", ", k, ", ",
              p, ", ", q, "], expected [", g.n, ", ", g.k, ", ", g.p, ", ", g.q, "]");
  OCTET_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan->y.get(), CUDNN_TENSOR_NCHW, type, to_int(g.n), to_int(g.k),
                                               to_int(g.p), to_int(g.q)));
  return plan;
}

// Whether an algorithm's math type keeps the precision asked for. TENSOR_OP_MATH_ALLOW_CONVERSION
// may round FP32 inputs to FP16, which is never wanted.
bool math_allowed(cudnnMathType_t m, DType dtype, bool tf32) {
  if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
  if (dtype == DType::f32 && !tf32) return m == CUDNN_FMA_MATH;
  return true;
}

// The first (fastest by the heuristic) usable result, deterministic ones first; -1 if none.
template <typename Perf>
int pick(const std::vector<Perf>& perf, DType dtype, bool tf32) {
  auto usable = [&](const Perf& r) {
    return r.status == CUDNN_STATUS_SUCCESS && math_allowed(r.mathType, dtype, tf32) && r.memory <= kMaxWorkspace;
  };
  for (size_t i = 0; i < perf.size(); ++i)
    if (usable(perf[i]) && perf[i].determinism == CUDNN_DETERMINISTIC) return static_cast<int>(i);
  for (size_t i = 0; i < perf.size(); ++i)
    if (usable(perf[i])) return static_cast<int>(i);
  return -1;
}

// Asks cuDNN's heuristics for `pass` of `plan` and records the choice: the algorithm, its math
// type (set on the pass's descriptor) and its workspace size.
void choose(cudnnHandle_t h, Plan& plan, Pass pass, DType dtype, bool tf32) {
  Algo& a = plan.algo[pass];
  cudnnConvolutionDescriptor_t conv = plan.conv[pass].get();
  auto record = [&](const auto& perf, auto workspace_of) {
    const int i = pick(perf, dtype, tf32);
    if (i < 0) return;
    OCTET_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, perf[i].mathType));
    a.algo = static_cast<int>(perf[i].algo);
    OCTET_CUDNN_CHECK(workspace_of(perf[i].algo, &a.workspace));
  };
  int max_count = 0, returned = 0;
  // A heuristic call that fails means cuDNN has no algorithm for the shape: use the direct kernels.
  if (pass == kForward) {
    OCTET_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(max_count, 1));
    if (cudnnGetConvolutionForwardAlgorithm_v7(h, plan.x.get(), plan.w.get(), conv, plan.y.get(), max_count, &returned,
                                               perf.data()) == CUDNN_STATUS_SUCCESS) {
      perf.resize(std::clamp(returned, 0, max_count));
      record(perf, [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(h, plan.x.get(), plan.w.get(), conv, plan.y.get(), algo, bytes);
      });
    }
  } else if (pass == kBackwardData) {
    OCTET_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(std::max(max_count, 1));
    if (cudnnGetConvolutionBackwardDataAlgorithm_v7(h, plan.w.get(), plan.y.get(), conv, plan.x.get(), max_count,
                                                    &returned, perf.data()) == CUDNN_STATUS_SUCCESS) {
      perf.resize(std::clamp(returned, 0, max_count));
      record(perf, [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, plan.w.get(), plan.y.get(), conv, plan.x.get(), algo,
                                                            bytes);
      });
    }
  } else {
    OCTET_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(std::max(max_count, 1));
    if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, plan.x.get(), plan.y.get(), conv, plan.w.get(), max_count,
                                                      &returned, perf.data()) == CUDNN_STATUS_SUCCESS) {
      perf.resize(std::clamp(returned, 0, max_count));
      record(perf, [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, plan.x.get(), plan.y.get(), conv, plan.w.get(), algo,
                                                              bytes);
      });
    }
  }
  a.chosen = true;
}

// What one call needs from a plan, copied out under the lock.
struct Prepared {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  int algo;
  size_t workspace;
};

Prepared prepare(cudnnHandle_t h, const Conv2dGeometry& g, DType dtype, Pass pass) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::array<int64_t, 17>, std::unique_ptr<Plan>>();  // never destroyed
  const bool tf32 = dtype == DType::f32 && allow_tf32();
  const std::array<int64_t, 17> key{current_device(),
                                    static_cast<int64_t>(dtype),
                                    tf32,
                                    g.n,
                                    g.c,
                                    g.h,
                                    g.w,
                                    g.k,
                                    g.r,
                                    g.s,
                                    g.stride_h,
                                    g.stride_w,
                                    g.pad_h,
                                    g.pad_w,
                                    g.dil_h,
                                    g.dil_w,
                                    g.groups};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache->find(key);
  if (it == cache->end()) it = cache->emplace(key, create_plan(g, dtype, tf32)).first;
  Plan& plan = *it->second;
  if (!plan.algo[pass].chosen) choose(h, plan, pass, dtype, tf32);
  return {plan.x.get(),          plan.y.get(),         plan.w.get(),
          plan.conv[pass].get(), plan.algo[pass].algo, plan.algo[pass].workspace};
}

// Whether every size cuDNN sees fits its int arguments when the batch is cut into slices.
bool cudnn_can_run(const Conv2dGeometry& g) {
  const int64_t per_sample = std::max(g.c * g.h * g.w, g.k * g.p * g.q);
  for (int64_t v :
       {per_sample, g.k * (g.c / g.groups) * g.r * g.s, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dil_h, g.dil_w})
    if (v > kIntMax) return false;
  return true;
}

// Batch slices (geometry with the slice's N, first sample n0) small enough that no tensor cuDNN
// sees has 2^31 elements.
using Slices = std::vector<std::pair<Conv2dGeometry, int64_t>>;
Slices batch_slices(const Conv2dGeometry& g) {
  const int64_t per_sample = std::max<int64_t>(1, std::max(g.c * g.h * g.w, g.k * g.p * g.q));
  const int64_t step = std::max<int64_t>(1, std::min(g.n, kIntMax / per_sample));
  Slices slices;
  for (int64_t n0 = 0; n0 < g.n; n0 += step) {
    Conv2dGeometry s = g;
    s.n = std::min(step, g.n - n0);
    slices.emplace_back(s, n0);
  }
  return slices;
}

// The cuDNN calls of one pass, one per batch slice; none when cuDNN has no algorithm for one of
// them (the caller then uses the direct kernels).
std::vector<Prepared> prepare_slices(cudnnHandle_t h, const Slices& slices, DType dtype, Pass pass) {
  std::vector<Prepared> out;
  for (const auto& [geom, n0] : slices) {
    out.push_back(prepare(h, geom, dtype, pass));
    if (out.back().algo < 0) return {};
  }
  return out;
}

Tensor workspace_for(const std::vector<Prepared>& calls, const Tensor& like) {
  size_t bytes = 0;
  for (const Prepared& c : calls) bytes = std::max(bytes, c.workspace);
  if (bytes == 0) return Tensor();
  return empty({static_cast<int64_t>(bytes)}, TensorOptions(DType::u8).device(like.device()));
}

// Alpha and beta in the type cuDNN wants for the data type (float for f32 and bf16, double for f64).
const void* scale(DType t, int v) {
  static const float f[2] = {0.0f, 1.0f};
  static const double d[2] = {0.0, 1.0};
  return t == DType::f64 ? static_cast<const void*>(&d[v]) : static_cast<const void*>(&f[v]);
}

// A pointer `n0` samples of `per_sample` elements into contiguous t.
void* at_sample(const Tensor& t, int64_t n0, int64_t per_sample) {
  return static_cast<char*>(t.raw_data()) + n0 * per_sample * static_cast<int64_t>(dtype_size(t.dtype()));
}

// The shared operand checks, and the dtypes cuDNN and the direct kernels take.
void check_operands(const char* op, const Conv2dGeometry& g, const Tensor& x, const Tensor& w) {
  check_conv_operands(op, g, x, w);
  OCTET_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64 || x.dtype() == DType::bf16, op,
              ": expected dtype f32, f64 or bf16, got ", x.dtype());
  OCTET_CHECK(w.dtype() == x.dtype(), op, ": dtypes differ: input ", x.dtype(), ", weight ", w.dtype());
}

// Runs fn; a failure inside cuDNN gets the convolution's shape appended to its message.
template <typename Fn>
void with_shape(const char* op, const Conv2dGeometry& g, DType dtype, Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    OCTET_FAIL(op, ": ", e.what(), " [", dtype, " input [", g.n, ", ", g.c, ", ", g.h, ", ", g.w, "], weight [", g.k,
               ", ", g.c / g.groups, ", ", g.r, ", ", g.s, "], stride (", g.stride_h, ", ", g.stride_w, "), padding (",
               g.pad_h, ", ", g.pad_w, "), dilation (", g.dil_h, ", ", g.dil_w, "), groups ", g.groups, "]");
  }
}

// The cuDNN passes; each returns false, having done nothing, when cuDNN has no algorithm.

bool cudnn_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& out) {
  cudnnHandle_t h = cudnn_handle();
  const Slices slices = batch_slices(g);
  const std::vector<Prepared> calls = prepare_slices(h, slices, x.dtype(), kForward);
  if (calls.empty()) return false;
  Tensor ws = workspace_for(calls, x);
  for (size_t i = 0; i < calls.size(); ++i) {
    const Prepared& c = calls[i];
    const int64_t n0 = slices[i].second;
    OCTET_CUDNN_CHECK(cudnnConvolutionForward(h, scale(x.dtype(), 1), c.x, at_sample(x, n0, g.c * g.h * g.w), c.w,
                                              w.raw_data(), c.conv, static_cast<cudnnConvolutionFwdAlgo_t>(c.algo),
                                              ws.defined() ? ws.raw_data() : nullptr, c.workspace, scale(x.dtype(), 0),
                                              c.y, at_sample(out, n0, g.k * g.p * g.q)));
  }
  return true;
}

bool cudnn_backward_data(const Conv2dGeometry& g, const Tensor& w, const Tensor& dout, const Tensor& dx) {
  cudnnHandle_t h = cudnn_handle();
  const Slices slices = batch_slices(g);
  const std::vector<Prepared> calls = prepare_slices(h, slices, dx.dtype(), kBackwardData);
  if (calls.empty()) return false;
  Tensor ws = workspace_for(calls, dx);
  for (size_t i = 0; i < calls.size(); ++i) {
    const Prepared& c = calls[i];
    const int64_t n0 = slices[i].second;
    OCTET_CUDNN_CHECK(cudnnConvolutionBackwardData(
        h, scale(dx.dtype(), 1), c.w, w.raw_data(), c.y, at_sample(dout, n0, g.k * g.p * g.q), c.conv,
        static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws.defined() ? ws.raw_data() : nullptr, c.workspace,
        scale(dx.dtype(), 0), c.x, at_sample(dx, n0, g.c * g.h * g.w)));
  }
  return true;
}

bool cudnn_backward_filter(const Conv2dGeometry& g, const Tensor& x, const Tensor& dout, const Tensor& dw) {
  cudnnHandle_t h = cudnn_handle();
  const Slices slices = batch_slices(g);
  const std::vector<Prepared> calls = prepare_slices(h, slices, dw.dtype(), kBackwardFilter);
  if (calls.empty()) return false;
  Tensor ws = workspace_for(calls, dw);
  for (size_t i = 0; i < calls.size(); ++i) {
    const Prepared& c = calls[i];
    const int64_t n0 = slices[i].second;
    // Later slices add onto the earlier ones' sum (beta = 1).
    OCTET_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        h, scale(dw.dtype(), 1), c.x, at_sample(x, n0, g.c * g.h * g.w), c.y, at_sample(dout, n0, g.k * g.p * g.q),
        c.conv, static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws.defined() ? ws.raw_data() : nullptr,
        c.workspace, scale(dw.dtype(), i == 0 ? 0 : 1), c.w, dw.raw_data()));
  }
  return true;
}

}  // namespace

namespace {

// Where a kernel that writes `dtype` puts a result meant for dst: dst itself when it has that
// dtype (or is undefined), else a temporary that finish() converts into dst (widening bf16, or
// rounding f32 once).
class Staged {
 public:
  Staged(const Tensor& dst, DType dtype)
      : dst_(dst),
        buf_(!dst.defined() || dst.dtype() == dtype ? dst
                                                    : empty(dst.shape(), TensorOptions(dtype).device(dst.device()))) {}
  const Tensor& get() const { return buf_; }
  void finish() const {
    if (dst_.defined() && buf_.dtype() != dst_.dtype()) copy(dst_, buf_);
  }

 private:
  Tensor dst_, buf_;
};

// A bf16 convolution on cuDNN's bf16 kernels into out (bf16, or f32 widened from it), the bias
// added in f32; false, having done nothing, where cuDNN has no algorithm.
bool bf16_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  if (is_depthwise(g) || !cudnn_can_run(g)) return false;
  const Staged y(out, DType::bf16);
  if (!cudnn_forward(g, x, w, y.get())) return false;
  y.finish();
  if (bias.defined()) add_channel_bias(out, bias, g.n, g.k, g.p * g.q);
  return true;
}

}  // namespace

void conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  if (x.dtype() == DType::bf16) {
    check_operands("conv2d_forward", g, x, w);
    OCTET_CHECK(out.is_contiguous() && (out.dtype() == DType::bf16 || out.dtype() == DType::f32) &&
                    out.numel() == g.n * g.k * g.p * g.q,
                "conv2d_forward: a bf16 convolution on CUDA writes a contiguous bf16 or f32 output of ",
                g.n * g.k * g.p * g.q, " elements, got ", out.dtype(), " ", out.shape());
    OCTET_CHECK(!bias.defined() || (bias.is_contiguous() && bias.dtype() == DType::f32 && bias.numel() == g.k),
                "conv2d_forward: a bf16 convolution takes a contiguous f32 bias of ", g.k, " elements");
    bool done = out.numel() == 0;
    if (!done) with_shape("conv2d_forward", g, x.dtype(), [&] { done = bf16_forward(g, x, w, bias, out); });
    if (!done) {  // the f32 kernels on the widened operands; a bf16 out rounded once
      const Staged y(out, DType::f32);
      cuda::conv2d_forward(g, widened_to_f32(x), widened_to_f32(w), bias, y.get());
      y.finish();
    }
    return;
  }
  check_operands("conv2d_forward", g, x, w);
  OCTET_CHECK(out.is_contiguous() && out.dtype() == x.dtype() && out.numel() == g.n * g.k * g.p * g.q,
              "conv2d_forward: expected a contiguous ", x.dtype(), " output of ", g.n * g.k * g.p * g.q,
              " elements, got ", out.dtype(), " ", out.shape());
  OCTET_CHECK(!bias.defined() || (bias.is_contiguous() && bias.dtype() == x.dtype() && bias.numel() == g.k),
              "conv2d_forward: expected a contiguous ", x.dtype(), " bias of ", g.k, " elements");
  if (out.numel() == 0) return;
  with_shape("conv2d_forward", g, x.dtype(), [&] {
    if (is_depthwise(g) || !cudnn_can_run(g) || !cudnn_forward(g, x, w, out))
      return direct_conv2d_forward(g, x, w, bias, out);  // adds the bias itself
    if (bias.defined()) add_channel_bias(out, bias, g.n, g.k, g.p * g.q);
  });
}

namespace {

// The backward of a bf16 convolution: dx (bf16 or f32) and dw (f32) from cuDNN's bf16 kernels
// where it has them, each pass that it has not on the f32 kernels with the widened operands.
void bf16_backward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout, const Tensor& dx,
                   const Tensor& dw) {
  check_operands("conv2d_backward", g, x, w);
  OCTET_CHECK(dout.dtype() == DType::bf16 && (!dx.defined() || dx.dtype() == DType::bf16 || dx.dtype() == DType::f32) &&
                  (!dw.defined() || dw.dtype() == DType::f32),
              "conv2d_backward: a bf16 convolution on CUDA takes a bf16 dout and writes a bf16 or f32 dx and an "
              "f32 dw");
  const bool sizes = dout.is_contiguous() && dout.numel() == g.n * g.k * g.p * g.q &&
                     (!dx.defined() || (dx.is_contiguous() && dx.numel() == x.numel())) &&
                     (!dw.defined() || (dw.is_contiguous() && dw.numel() == w.numel()));
  OCTET_CHECK(sizes, "conv2d_backward: expected a contiguous dout of ", g.n * g.k * g.p * g.q,
              " elements and dx, dw of ", x.numel(), " and ", w.numel(), ", got ", dout.shape(), ", ",
              dx.defined() ? dx.shape() : Shape{}, ", ", dw.defined() ? dw.shape() : Shape{});
  const bool cudnn = g.n > 0 && !is_depthwise(g) && cudnn_can_run(g);
  bool dx_done = !dx.defined(), dw_done = !dw.defined();
  if (cudnn)
    with_shape("conv2d_backward", g, x.dtype(), [&] {
      if (!dx_done) {
        const Staged d(dx, DType::bf16);
        if ((dx_done = cudnn_backward_data(g, w, dout, d.get()))) d.finish();
      }
      if (!dw_done) {
        const Staged d(dw, DType::bf16);
        if ((dw_done = cudnn_backward_filter(g, x, dout, d.get()))) d.finish();
      }
    });
  if (!dx_done || !dw_done) {  // in f32; a bf16 dx rounded once
    const Staged d(dx_done ? Tensor() : dx, DType::f32);
    cuda::conv2d_backward(g, widened_to_f32(x), widened_to_f32(w), widened_to_f32(dout), d.get(),
                          dw_done ? Tensor() : dw);
    d.finish();
  }
}

}  // namespace

void conv2d_backward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout, const Tensor& dx,
                     const Tensor& dw) {
  if (x.dtype() == DType::bf16) return bf16_backward(g, x, w, dout, dx, dw);
  check_operands("conv2d_backward", g, x, w);
  check_conv_grads("conv2d_backward", g, x, w, dout, dx, dw);
  if (!dx.defined() && !dw.defined()) return;
  if (g.n == 0) {  // an empty batch: dx is empty, dw sums nothing
    if (dw.defined() && dw.numel() > 0)
      OCTET_CUDA_CHECK(cudaMemsetAsync(dw.raw_data(), 0, dw.numel() * dtype_size(dw.dtype()), stream()));
    return;
  }
  const bool direct = is_depthwise(g) || !cudnn_can_run(g);
  with_shape("conv2d_backward", g, x.dtype(), [&] {
    if (dx.defined() && (direct || !cudnn_backward_data(g, w, dout, dx))) direct_conv2d_backward_data(g, w, dout, dx);
    if (dw.defined() && (direct || !cudnn_backward_filter(g, x, dout, dw)))
      direct_conv2d_backward_weight(g, x, dout, dw);
  });
}

}  // namespace octet::cuda
