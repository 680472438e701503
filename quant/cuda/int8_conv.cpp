// The CUDA half of the INT8 convolution op (quant/cuda/int8_conv.h) and the per-layer choice of
// kernel path. Choice: a forced path (set_int8_conv_path / OCTET_INT8_CONV_PATH) runs where it can;
// otherwise the choice cached for (device, product, geometry), made on first use by timing each
// candidate once after a warm-up run (cuBLASLt plans, first touches) with CUDA events. All paths
// write the same values, so whichever ran last left a correct output; the choice changes speed,
// never results, and a training run's numbers do not depend on it.
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#include "core/cuda.h"
#include "core/cuda/cuda_util.h"
#include "quant/cuda/int8_conv.h"
#include "quant/cuda/int8_conv_kernels.h"
#include "quant/cuda/int8_quant.h"

namespace octet::quant::cuda {

namespace {

enum Product : int { kForward = 0, kBackwardInput = 1, kBackwardWeight = 2 };

// (device, product, the geometry's 16 fields).
using Key = std::array<int64_t, 18>;
static_assert(sizeof(Conv2dGeometry) == 16 * sizeof(int64_t), "Conv2dGeometry: sixteen int64 fields");

Key key_of(Product product, const Conv2dGeometry& g) {
  Key key{::octet::cuda::current_device(), product};
  std::memcpy(key.data() + 2, &g, sizeof g);
  return key;
}

// Per (device, product, geometry): the automatic choice, and the path that ran last.
struct Choices {
  std::mutex mutex;
  std::map<Key, Int8ConvPath> chosen, last;
};

Choices& choices() {
  static auto* c = new Choices();  // never destroyed (used until process exit)
  return *c;
}

Int8ConvPath lookup(const std::map<Key, Int8ConvPath>& m, const Key& key) {
  std::lock_guard<std::mutex> lock(choices().mutex);
  auto it = m.find(key);
  return it == m.end() ? Int8ConvPath::automatic : it->second;
}

// Milliseconds of one run of `path` (false: it cannot run this geometry).
template <class Args>
bool time_path(bool (*runner)(Int8ConvPath, const Args&), Int8ConvPath path, const Args& args, float* ms) {
  if (!runner(path, args)) return false;  // warm-up
  cudaEvent_t start = nullptr, stop = nullptr;
  OCTET_CUDA_CHECK(cudaEventCreate(&start));
  OCTET_CUDA_CHECK(cudaEventCreate(&stop));
  OCTET_CUDA_CHECK(cudaEventRecord(start, ::octet::cuda::stream()));
  runner(path, args);
  OCTET_CUDA_CHECK(cudaEventRecord(stop, ::octet::cuda::stream()));
  OCTET_CUDA_CHECK(cudaEventSynchronize(stop));
  OCTET_CUDA_CHECK(cudaEventElapsedTime(ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return true;
}

// The automatic choice for `key`: the cached one, or (first time) the fastest candidate, cached.
template <class Args>
Int8ConvPath run_automatic(const Key& key, const Conv2dGeometry& g, const Args& args,
                           bool (*runner)(Int8ConvPath, const Args&)) {
  const Int8ConvPath known = lookup(choices().chosen, key);
  if (known != Int8ConvPath::automatic) {
    OCTET_CHECK(runner(known, args), "int8_conv2d: the CUDA path ", int8_conv_path_name(known),
                " chosen for this geometry can no longer run it");
    return known;
  }
  Int8ConvPath best = Int8ConvPath::automatic;
  if (ops::is_depthwise(g)) {
    if (runner(Int8ConvPath::direct, args)) best = Int8ConvPath::direct;
  } else {
    float best_ms = std::numeric_limits<float>::infinity();
    for (Int8ConvPath p : {Int8ConvPath::tensor_core, Int8ConvPath::dp4a}) {
      float ms = 0;
      if (time_path(runner, p, args, &ms) && ms < best_ms) best_ms = ms, best = p;
    }
  }
  // The last candidate timed is dp4a (it always runs), so the output is complete either way.
  OCTET_CHECK(best != Int8ConvPath::automatic, "int8_conv2d: no CUDA kernel path can run this geometry");
  std::lock_guard<std::mutex> lock(choices().mutex);
  choices().chosen.emplace(key, best);
  return best;
}

// Runs one product by the forced path where it can run, else by the automatic choice.
template <class Args>
void run(Product product, const Conv2dGeometry& g, const Args& args, bool (*runner)(Int8ConvPath, const Args&)) {
  const Key key = key_of(product, g);
  const Int8ConvPath forced = int8_conv_path();
  const Int8ConvPath used =
      forced != Int8ConvPath::automatic && runner(forced, args) ? forced : run_automatic(key, g, args, runner);
  std::lock_guard<std::mutex> lock(choices().mutex);
  choices().last[key] = used;
}

Tensor device_like(const Shape& shape, DType dtype, const Tensor& like) {
  return empty(shape, TensorOptions(dtype).device(like.device()));
}

}  // namespace

std::array<float, 2> absmax_pair(const Tensor& a, const Tensor& b) {
  const std::vector<float> m = absmax({{a.data<float>(), a.numel()}, {b.data<float>(), b.numel()}});
  return {m[0], m[1]};
}

Tensor int8_conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, float clip_x,
                           float clip_w, const Tensor& out) {
  Tensor wq = device_like(w.shape(), DType::i8, w);
  quantize(w.data<float>(), w.numel(), int8_inv_scale(clip_w), Int8Rounding::nearest, 0, wq.data<int8_t>());
  const paths::ForwardArgs args{g,
                                x.data<float>(),
                                int8_inv_scale(clip_x),
                                wq.data<int8_t>(),
                                int8_scale(clip_x) * int8_scale(clip_w),
                                bias.defined() ? bias.data<float>() : nullptr,
                                out.data<float>()};
  run(kForward, g, args, run_forward);
  return wq;
}

Int8ConvGrads int8_conv2d_backward(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, float inv_x,
                                   const Tensor& wq, float clip, Int8Rounding rounding, uint64_t seed, float sx,
                                   float sw, Int8ConvWants wants) {
  const int64_t pq = g.p * g.q, ld = ops::dy_ld(g);
  Tensor dyq = device_like({g.k * ld}, DType::i8, dy);
  const DeviceSums pending = quantize_channel_major(dy.data<float>(), g.n, g.k, pq, ld, int8_inv_scale(clip), rounding,
                                                    seed, dyq.data<int8_t>());
  Int8ConvGrads r;
  if (wants.db) {
    r.db = device_like({g.k}, DType::f32, dy);
    channel_sums(dy.data<float>(), g.n, g.k, pq, r.db.data<float>());
  }
  const float sdy = int8_scale(clip);
  if (wants.dx) {
    r.dx = device_like({g.n, g.c, g.h, g.w}, DType::f32, dy);
    run(kBackwardInput, g,
        paths::BackwardInputArgs{g, dyq.data<int8_t>(), ld, wq.data<int8_t>(), sdy * sw, r.dx.data<float>()},
        run_backward_input);
  }
  if (wants.dw) {
    r.dw = device_like({g.k, g.c / g.groups, g.r, g.s}, DType::f32, dy);
    run(kBackwardWeight, g,
        paths::BackwardWeightArgs{g, x.data<float>(), inv_x, dyq.data<int8_t>(), ld, sdy * sx, r.dw.data<float>()},
        run_backward_weight);
  }
  // The backward's one wait, with its kernels already queued.
  r.sums = pending.read();
  // As the CPU: a NaN or infinite dy (or clip) must not turn into zeros.
  if (!(r.sums.finite && std::isfinite(clip))) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    if (r.dx.defined()) r.dx.fill_(nan);
    if (r.dw.defined()) r.dw.fill_(nan);
  }
  return r;
}

std::array<Int8ConvPath, 3> last_paths(const Conv2dGeometry& g) {
  const auto& last = choices().last;
  return {lookup(last, key_of(kForward, g)), lookup(last, key_of(kBackwardInput, g)),
          lookup(last, key_of(kBackwardWeight, g))};
}

}  // namespace octet::quant::cuda
