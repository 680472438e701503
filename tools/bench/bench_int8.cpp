// INT8 convolution benchmark: per-layer forward and forward+backward time of int8_conv2d
// (quant/int8_conv.h: stochastic rounding and DSGC on, as in training) against the FP32 conv2d on
// ResNet-50 and MobileNetV2-CIFAR layer shapes, with the INT8/FP32 ratios from the same run.
// - CPU (default): FP32 = oneDNN primitives; also the DSGC search (run once per
//   clip_update_period steps, not in the step time) and the int8 GEMM (oneDNN s8s8s32 and the
//   reference loops) at 1024^3 beside SGEMM.
// - `--device cuda`: FP32 = cuDNN (exact FP32, no TF32), INT8 through each CUDA kernel path forced
//   in turn (quant/int8_conv.h: dp4a, tensor_core, direct for depthwise layers) and the automatic
//   per-layer choice, with the paths it chose for forward/dx/dw. Times include the op's host waits
//   (one per forward for the clips, one per backward for d_c).
// - `--layouts`: the CPU depthwise kernels alone (quant/cpu/int8_conv.h, on int8 codes) in each
//   layout -- planes and channels_last -- forward, dx and dw on MobileNetV2's depthwise geometries
//   (CIFAR and ImageNet at 96x96 and 224x224), rounds alternating between the layouts; the data
//   behind the automatic choice.
//   build/tools/bench/octet_bench_int8 [--device cpu|cuda] [--threads 2] [--reps 3] [--passes 1] [--batch 32]
//                                      [--only SUBSTRING] [--layouts]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda.h"
#include "core/octet.h"
#include "quant/cpu/int8_conv.h"
#include "quant/cpu/int8_gemm.h"
#include "quant/dsgc.h"
#include "quant/int8_conv.h"
#include "tools/bench/bench_util.h"

using namespace octet;
using octet::bench::best_time;

namespace {

struct Layer {
  const char* name;
  int64_t c, hw, k, kernel, stride, groups;
};

// ResNet-50 (ImageNet, v1.5: the stride sits on the 3x3) and MobileNetV2 for CIFAR (32x32 input,
// expansion 6): input channels, spatial size, output channels, kernel, stride, groups.
const Layer kLayers[] = {
    {"R50 conv2 1x1 56x56 64->64", 64, 56, 64, 1, 1, 1},
    {"R50 conv2 3x3 56x56 64->64", 64, 56, 64, 3, 1, 1},
    {"R50 conv2 1x1 56x56 64->256 (expand)", 64, 56, 256, 1, 1, 1},
    {"R50 conv2 1x1 56x56 256->64 (reduce)", 256, 56, 64, 1, 1, 1},
    {"R50 conv3 3x3 s2 56x56 128->128", 128, 56, 128, 3, 2, 1},
    {"R50 conv3 3x3 28x28 128->128", 128, 28, 128, 3, 1, 1},
    {"R50 conv4 3x3 14x14 256->256", 256, 14, 256, 3, 1, 1},
    {"R50 conv4 1x1 14x14 256->1024 (expand)", 256, 14, 1024, 1, 1, 1},
    {"R50 conv5 3x3 7x7 512->512", 512, 7, 512, 3, 1, 1},
    {"R50 conv5 1x1 7x7 512->2048 (expand)", 512, 7, 2048, 1, 1, 1},
    {"MV2 1x1 32x32 24->144 (expand)", 24, 32, 144, 1, 1, 1},
    {"MV2 dw 3x3 32x32 144", 144, 32, 144, 3, 1, 144},
    {"MV2 1x1 32x32 144->24 (project)", 144, 32, 24, 1, 1, 1},
    {"MV2 dw 3x3 s2 32x32 144", 144, 32, 144, 3, 2, 144},
    {"MV2 dw 3x3 16x16 192", 192, 16, 192, 3, 1, 192},
    {"MV2 1x1 16x16 32->192 (expand)", 32, 16, 192, 1, 1, 1},
    {"MV2 dw 3x3 8x8 384", 384, 8, 384, 3, 1, 384},
    {"MV2 1x1 8x8 384->64 (project)", 384, 8, 64, 1, 1, 1},
    {"MV2 dw 3x3 4x4 960", 960, 4, 960, 3, 1, 960},
    {"MV2 1x1 4x4 160->960 (expand)", 160, 4, 960, 1, 1, 1},
};

struct Times {
  double fwd, step;
};

// Forward alone (no graph) and forward + backward to x and w, best of `reps` (on a GPU each run
// waits for the device).
template <typename Conv>
Times time_conv(int reps, const Tensor& x, const Tensor& w, const Tensor& dy, Conv conv) {
  const bool gpu = x.device().is_cuda();
  Times t{};
  t.fwd = best_time(reps, [&] {
    NoGradGuard no_grad;
    conv(x, w);
    if (gpu) cuda::synchronize();
  });
  t.step = best_time(reps, [&] {
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    conv(x, w).backward(dy);
    if (gpu) cuda::synchronize();
  });
  return t;
}

Conv2dOptions options_of(const Layer& l) {
  return Conv2dOptions().stride(l.stride).padding(l.kernel / 2).groups(l.groups);
}

// Training settings: stochastic rounding, DSGC every 100 steps, a fresh layer state per timing.
// The warm-up call of the step timing is backward 0, which searches; the timed ones reuse its clip.
Times time_int8(int reps, const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dOptions& opts) {
  auto layer = std::make_shared<quant::Int8Layer>();
  return time_conv(reps, x, w, dy,
                   [&](const Tensor& a, const Tensor& b) { return quant::int8_conv2d(a, b, {}, opts, layer); });
}

std::string str_printf(const char* f, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Milliseconds with three decimals, or "-" for a cell not measured (0).
std::string ms_or_dash(double seconds) { return seconds > 0 ? str_printf("%.3f", seconds * 1e3) : "-"; }

const char* short_name(quant::Int8ConvPath p) {
  switch (p) {
    case quant::Int8ConvPath::dp4a:
      return "dp4a";
    case quant::Int8ConvPath::tensor_core:
      return "tc";
    case quant::Int8ConvPath::direct:
      return "direct";
    default:
      return "?";
  }
}

// The CUDA table: FP32 (cuDNN) against each INT8 kernel path and the automatic choice.
int run_cuda(int reps, int64_t batch, const std::string& only) {
  if (!cuda::is_available()) {
    std::fprintf(stderr, "octet_bench_int8 --device cuda: no usable CUDA device (%s)\n",
                 cuda_compiled() ? "no GPU or driver" : "this build has no CUDA backend");
    return 1;
  }
  cuda::set_allow_tf32(false);
  const Device dev = Device::cuda(0);
  std::printf(
      "octet INT8 conv benchmark on %s (driver CUDA %s, cuDNN %s): batch %lld, best of %d; FP32 = cuDNN "
      "(FMA math, no TF32)\n\n",
      cuda::device_name(0).c_str(), cuda::driver_version().c_str(), cuda::cudnn_version().c_str(),
      static_cast<long long>(batch), reps);
  std::printf(
      "| layer (batch %3lld) | FP32 fwd | FP32 f+b | DP4A fwd | DP4A f+b | TC fwd | TC f+b | direct f+b | auto f+b | "
      "auto paths fwd/dx/dw | DP4A/FP32 | TC/FP32 | auto/FP32 |\n",
      static_cast<long long>(batch));
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  Generator gen(0);
  const quant::Int8ConvPath saved = quant::int8_conv_path();
  double fp32_total = 0, auto_total = 0;
  for (const Layer& l : kLayers) {
    if (!only.empty() && std::string(l.name).find(only) == std::string::npos) continue;
    const bool depthwise = l.groups > 1 && l.groups == l.c;
    Tensor x = randn({batch, l.c, l.hw, l.hw}, DType::f32, &gen).to(dev).requires_grad_(true);
    Tensor w = (randn({l.k, l.c / l.groups, l.kernel, l.kernel}, DType::f32, &gen) * 0.1).to(dev).requires_grad_(true);
    const Conv2dOptions opts = options_of(l);
    Tensor y;
    {
      NoGradGuard no_grad;
      y = conv2d(x, w, Tensor(), opts);
    }
    Tensor dy = randn(y.shape(), DType::f32, &gen).to(dev) * 1e-3;
    const Times fp =
        time_conv(reps, x, w, dy, [&](const Tensor& a, const Tensor& b) { return conv2d(a, b, {}, opts); });
    // Times of a forced path; 0 (printed "-") where it did not run every product itself.
    auto forced = [&](quant::Int8ConvPath p) {
      quant::set_int8_conv_path(p);
      const Times t = time_int8(reps, x, w, dy, opts);
      for (quant::Int8ConvPath used : quant::int8_conv_last_paths(x, w, opts))
        if (p != quant::Int8ConvPath::automatic && used != p) return Times{0, 0};
      return t;
    };
    // The generic kernels on a depthwise layer: dp4a packs one channel per four; tensor_core would
    // run one GEMM per channel, so it is left out there.
    const Times dp4a = forced(quant::Int8ConvPath::dp4a);
    const Times tc = depthwise ? Times{0, 0} : forced(quant::Int8ConvPath::tensor_core);
    const Times direct = depthwise ? forced(quant::Int8ConvPath::direct) : Times{0, 0};
    const Times aut = forced(quant::Int8ConvPath::automatic);
    const auto chosen = quant::int8_conv_last_paths(x, w, opts);
    fp32_total += fp.step, auto_total += aut.step;
    std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %s | %s | %s | %.3f | %s/%s/%s | %.2f | %s | %.2f |\n", l.name,
                fp.fwd * 1e3, fp.step * 1e3, dp4a.fwd * 1e3, dp4a.step * 1e3, ms_or_dash(tc.fwd).c_str(),
                ms_or_dash(tc.step).c_str(), ms_or_dash(direct.step).c_str(), aut.step * 1e3, short_name(chosen[0]),
                short_name(chosen[1]), short_name(chosen[2]), dp4a.step / fp.step,
                tc.step > 0 ? str_printf("%.2f", tc.step / fp.step).c_str() : "-", aut.step / fp.step);
  }
  quant::set_int8_conv_path(saved);
  std::printf("| sum of the layers | | %.3f | | | | | | %.3f | | | | %.2f |\n", fp32_total * 1e3, auto_total * 1e3,
              auto_total / fp32_total);
  std::printf(
      "\nTimes in ms. f+b: forward + backward to input and weight (INT8: stochastic rounding, DSGC clip reused "
      "between searches). TC: im2col + cuBLASLt int8 GEMM (integer tensor cores). auto: the per-layer choice "
      "(timed once per geometry, then cached).\n");
  return 0;
}

// Depthwise 3x3 geometries of MobileNetV2: channels, input plane side, stride.
struct DwLayer {
  const char* name;
  int64_t c, hw, stride;
};
const DwLayer kDwLayers[] = {
    {"224: 112x112 32", 32, 112, 1},  {"224: 112x112 96 s2", 96, 112, 2}, {"224: 56x56 144", 144, 56, 1},
    {"224: 28x28 192", 192, 28, 1},   {"224: 14x14 384", 384, 14, 1},     {"224: 14x14 576 s2", 576, 14, 2},
    {"224: 7x7 960", 960, 7, 1},      {"96: 48x48 32", 32, 48, 1},         {"96: 24x24 144", 144, 24, 1},
    {"96: 24x24 144 s2", 144, 24, 2}, {"96: 12x12 192", 192, 12, 1},       {"96: 6x6 384", 384, 6, 1},
    {"96: 6x6 576 s2", 576, 6, 2},    {"96: 3x3 960", 960, 3, 1},          {"CIFAR: 32x32 32", 32, 32, 1},
    {"CIFAR: 32x32 144", 144, 32, 1}, {"CIFAR: 32x32 144 s2", 144, 32, 2}, {"CIFAR: 16x16 192", 192, 16, 1},
    {"CIFAR: 16x16 192 s2", 192, 16, 2}, {"CIFAR: 8x8 384", 384, 8, 1},    {"CIFAR: 8x8 576 s2", 576, 8, 2},
    {"CIFAR: 4x4 960", 960, 4, 1},
};

// The depthwise kernels in each layout, best of `reps` per round, `rounds` rounds alternating.
int run_layouts(int reps, int rounds, int64_t batch, const std::string& only) {
  using quant::cpu::Int8DepthwiseLayout;
  const Int8DepthwiseLayout saved = quant::cpu::int8_depthwise_layout();
  const Int8DepthwiseLayout layouts[2] = {Int8DepthwiseLayout::planes, Int8DepthwiseLayout::channels_last};
  std::printf(
      "| depthwise 3x3, batch %lld | planes fwd | dx | dw | channels_last fwd | dx | dw | lanes / planes (sum) | auto |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      static_cast<long long>(batch));
  Generator gen(1);
  for (const DwLayer& l : kDwLayers) {
    if (!only.empty() && std::string(l.name).find(only) == std::string::npos) continue;
    kernels::Conv2dGeometry g{};
    g.n = batch, g.c = l.c, g.h = l.hw, g.w = l.hw, g.k = l.c, g.r = 3, g.s = 3;
    g.stride_h = g.stride_w = l.stride, g.pad_h = g.pad_w = 1, g.dil_h = g.dil_w = 1, g.groups = l.c;
    g.p = (l.hw - 1) / l.stride + 1, g.q = g.p;
    auto codes = [&](const Shape& shape) {  // uniform in [-127, 127]
      std::vector<float> u = rand(shape, DType::f32, &gen).to_vector<float>();
      std::vector<int8_t> q(u.size());
      for (size_t i = 0; i < u.size(); ++i) q[i] = static_cast<int8_t>(static_cast<int>(u[i] * 255.0f) - 127);
      return from_blob(q.data(), shape, DType::i8).clone();
    };
    Tensor x = codes({g.c, g.n, g.h, g.w}), w = codes({g.k, 1, 3, 3}), dy = codes({g.k, g.n, g.p, g.q});
    Tensor out = empty({g.n, g.k, g.p, g.q}), dx = empty({g.n, g.c, g.h, g.w}), dw = empty({g.k, 1, 3, 3});
    double t[2][3];
    for (auto& row : t) std::fill(std::begin(row), std::end(row), 1e30);
    for (int round = 0; round < rounds; ++round)
      for (int li = 0; li < 2; ++li) {
        quant::cpu::set_int8_depthwise_layout(layouts[li]);
        t[li][0] = std::min(t[li][0], best_time(reps, [&] { quant::cpu::int8_conv2d_forward(g, x, w, 1e-3f, {}, out); }));
        t[li][1] = std::min(t[li][1], best_time(reps, [&] { quant::cpu::int8_conv2d_backward_input(g, dy, w, 1e-3f, dx); }));
        t[li][2] = std::min(t[li][2], best_time(reps, [&] { quant::cpu::int8_conv2d_backward_weight(g, x, dy, 1e-3f, dw); }));
      }
    quant::cpu::set_int8_depthwise_layout(Int8DepthwiseLayout::automatic);
    const double planes = t[0][0] + t[0][1] + t[0][2], lanes = t[1][0] + t[1][1] + t[1][2];
    const bool chose_lanes = quant::cpu::depthwise_layout_for(g) == Int8DepthwiseLayout::channels_last;
    std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %s |\n", l.name, t[0][0] * 1e3, t[0][1] * 1e3,
                t[0][2] * 1e3, t[1][0] * 1e3, t[1][1] * 1e3, t[1][2] * 1e3, lanes / planes,
                chose_lanes ? "channels_last" : "planes");
  }
  quant::cpu::set_int8_depthwise_layout(saved);
  std::printf("\nTimes in ms, best of %d per round over %d alternating rounds; int8 codes in, f32 out (scale 1e-3).\n",
              reps, rounds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 3, passes = 1;
  int64_t batch = 32;
  std::string only, device = "cpu";  // run only the layers whose name contains `only`
  bool layouts = false;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--layouts")) layouts = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--layouts")) {
      --i;  // a flag without a value
      continue;
    }
    if (!std::strcmp(argv[i], "--device"))
      device = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batch"))
      batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--passes"))
      passes = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only"))
      only = argv[i + 1];
  }
  if (device == "cuda") return run_cuda(reps, batch, only);
  if (device != "cpu") {
    std::fprintf(stderr, "octet_bench_int8: --device must be cpu or cuda, got %s\n", device.c_str());
    return 2;
  }
  set_num_threads(threads);
  if (layouts) return run_layouts(reps, std::max(passes, 2), batch, only);
  Generator gen(0);

  std::printf("octet INT8 conv benchmark: %d thread(s), batch %lld, best of %d x %d passes; int8 GEMM path: %s\n\n",
              threads, static_cast<long long>(batch), reps, passes,
              std::string(quant::cpu::int8_gemm_path_name(quant::cpu::int8_gemm_path())).c_str());

  {  // GEMMs at 1024^3
    const int64_t n = 1024;
    const double ops = 2.0 * n * n * n;
    Tensor a = randn({n, n}, DType::f32, &gen), b = randn({n, n}, DType::f32, &gen);
    const double ts = best_time(reps + 2, [&] { mm(a, b); });
    std::vector<int8_t> ia(n * n), ib(n * n);
    for (int64_t i = 0; i < n * n; ++i)
      ia[i] = static_cast<int8_t>(i * 37 % 255 - 127), ib[i] = static_cast<int8_t>(i * 91 % 255 - 127);
    std::vector<int32_t> c(n * n);
    std::printf("| GEMM 1024^3                          |       ms |  GOP/s |\n|---|---|---|\n");
    std::printf("| SGEMM f32 (octet mm: oneDNN)         | %8.2f | %6.0f |\n", ts * 1e3, ops / ts / 1e9);
    for (auto path : {quant::cpu::Int8GemmPath::dnnl, quant::cpu::Int8GemmPath::avx2, quant::cpu::Int8GemmPath::reference}) {
      if (!quant::cpu::int8_gemm_path_supported(path)) continue;
      const double t = best_time(path == quant::cpu::Int8GemmPath::reference ? 1 : reps + 2, [&] {
        quant::cpu::int8_gemm(path, false, false, n, n, n, ia.data(), n, ib.data(), n, c.data(), n, false);
      });
      std::printf("| int8 s8s8s32 (%-9s)             | %8.2f | %6.0f |\n",
                  std::string(quant::cpu::int8_gemm_path_name(path)).c_str(), t * 1e3, ops / t / 1e9);
    }
    std::printf("\n");
  }

  // Every cell is the best over `passes` passes through the table (and `reps` runs in each): the
  // shared machine's slow spells last seconds, so one pass can catch a layer in one of them.
  struct Cells {
    double fp_fwd = 1e30, fp_step = 1e30, q_fwd = 1e30, q_step = 1e30, search = 1e30;
  };
  std::vector<Cells> cells(std::size(kLayers));
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t li = 0; li < std::size(kLayers); ++li) {
      const Layer& l = kLayers[li];
      if (!only.empty() && std::string(l.name).find(only) == std::string::npos) continue;
      Tensor x = randn({batch, l.c, l.hw, l.hw}, DType::f32, &gen).requires_grad_(true);
      Tensor w = (randn({l.k, l.c / l.groups, l.kernel, l.kernel}, DType::f32, &gen) * 0.1).requires_grad_(true);
      const Conv2dOptions opts = options_of(l);
      Tensor y;
      {
        NoGradGuard no_grad;
        y = conv2d(x, w, Tensor(), opts);
      }
      Tensor dy = randn(y.shape(), DType::f32, &gen) * 1e-3;
      const Times fp =
          time_conv(reps, x, w, dy, [&](const Tensor& a, const Tensor& b) { return conv2d(a, b, {}, opts); });
      const Times q = time_int8(reps, x, w, dy, opts);
      const double search = best_time(1, [&] { quant::dsgc_search(dy); });
      Cells& c = cells[li];
      c.fp_fwd = std::min(c.fp_fwd, fp.fwd), c.fp_step = std::min(c.fp_step, fp.step);
      c.q_fwd = std::min(c.q_fwd, q.fwd), c.q_step = std::min(c.q_step, q.step), c.search = std::min(c.search, search);
    }
  }
  std::printf(
      "| layer (batch %3lld)                        | FP32 fwd | FP32 f+b | INT8 fwd | INT8 f+b | INT8/FP32 f+b | "
      "DSGC search |\n",
      static_cast<long long>(batch));
  std::printf("|---|---|---|---|---|---|---|\n");
  double fp32_total = 0, int8_total = 0;
  for (size_t li = 0; li < std::size(kLayers); ++li) {
    const Cells& c = cells[li];
    if (c.fp_step >= 1e30) continue;
    fp32_total += c.fp_step, int8_total += c.q_step;
    std::printf("| %-40s | %8.2f | %8.2f | %8.2f | %8.2f | %13.2f | %11.2f |\n", kLayers[li].name, c.fp_fwd * 1e3,
                c.fp_step * 1e3, c.q_fwd * 1e3, c.q_step * 1e3, c.q_step / c.fp_step, c.search * 1e3);
  }
  std::printf("| %-40s |          | %8.2f |          | %8.2f | %13.2f |             |\n", "sum of the layers",
              fp32_total * 1e3, int8_total * 1e3, int8_total / fp32_total);
  std::printf(
      "\nTimes in ms. f+b: forward + backward to input and weight. DSGC search: one search on this "
      "layer's dy (amortized over clip_update_period = 100 steps; not in f+b).\n");
  return 0;
}
