// The INT8 convolution op (quant/int8_conv.h): forward and both gradients against float64
// convolutions of the dequantized operands for many geometries (strides, padding, dilation,
// groups, depthwise, 1x1, odd sizes, several GEMM blocks), stochastic rounding and DSGC through the
// op, the per-layer stats and search schedule, thread-count and GEMM-path determinism, int32
// overflow safety of dw, non-finite values, requires_grad handling and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "core/cpu/isa.h"
#include "core/octet.h"
#include "quant/cpu/int8_conv.h"
#include "quant/cpu/int8_conv_detail.h"
#include "quant/cpu/int8_gemm.h"
#include "quant/dsgc.h"
#include "quant/int8_conv.h"
#include "quant/int8_tensor.h"
#include "tests/isa_scope.h"
#include "tests/quant/int8_conv_cases.h"
#include "tests/quant/int8_reference.h"

namespace octet::quant {
namespace {

using namespace testing;  // int8_reference.h

using ConvCase = Int8ConvCase;

// The shared geometries (random values: the all-+-127 case is the kernels' concern, covered by the
// emulation and GPU tests) plus blockings of the CPU kernels.
std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> all;
  for (const ConvCase& c : int8_conv_cases())
    if (c.scale == 1.0) all.push_back(c);
  // 30x30 planes padded to 32x32: 16 samples per block of the wide kernels, so 20 make two.
  all.push_back({"depthwise_two_blocks", 20, 2, 30, 30, 2, 3, 3, Conv2dOptions().padding(1).groups(2)});
  // 3*41*41 = 5043 output positions: two GEMM blocks, split inside a sample and a row.
  all.push_back({"two_blocks", 3, 5, 41, 41, 7, 3, 3, Conv2dOptions().padding(1)});
  all.push_back({"two_blocks_pointwise", 3, 5, 41, 41, 7, 1, 1, Conv2dOptions()});
  return all;
}

std::shared_ptr<Int8Layer> rtn_layer() {
  auto layer = std::make_shared<Int8Layer>();
  layer->config.stochastic_rounding_ = false;
  layer->config.dsgc_ = false;
  return layer;
}

class Int8ConvValues : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Int8ConvValues, ForwardMatchesFloatConvOfDequantized) {
  const ConvCase& cc = GetParam();
  Tensor x = random({cc.n, cc.c, cc.h, cc.w}, 1), w = random({cc.k, cc.c / cc.opts.groups_, cc.r, cc.s}, 2, 0.3);
  Tensor b = cc.bias ? random({cc.k}, 3) : Tensor();
  auto layer = rtn_layer();
  Tensor y = int8_conv2d(x, w, b, cc.opts, layer);
  EXPECT_EQ(layer->stats.input_clip, int8_absmax(x));
  EXPECT_EQ(layer->stats.weight_clip, int8_absmax(w));
  Tensor xh = dequantized64(x, int8_absmax(x)), wh = dequantized64(w, int8_absmax(w));
  Tensor b64 = cc.bias ? b.to(DType::f64) : Tensor();
  Tensor want = conv2d(xh, wh, b64, cc.opts);
  Tensor bound = conv2d(abs(xh), abs(wh), cc.bias ? abs(b64) : Tensor(), cc.opts);
  expect_within(y, want, bound, cc.name + " forward");
}

TEST_P(Int8ConvValues, BackwardMatchesFloatConvOfDequantized) {
  const ConvCase& cc = GetParam();
  for (bool sr : {false, true}) {
    Tensor x = random({cc.n, cc.c, cc.h, cc.w}, 11).requires_grad_(true);
    Tensor w = random({cc.k, cc.c / cc.opts.groups_, cc.r, cc.s}, 12, 0.3).requires_grad_(true);
    Tensor b = cc.bias ? random({cc.k}, 13).requires_grad_(true) : Tensor();
    auto layer = rtn_layer();
    layer->config.stochastic_rounding_ = sr;
    layer->config.dsgc_ = sr;  // the searched clip with stochastic rounding, max|dy| with RTN
    layer->seed = 99;
    Tensor y = int8_conv2d(x, w, b, cc.opts, layer);
    Tensor dy = random(y.shape(), 14, 0.01);
    y.backward(dy);
    // The reference quantizes dy exactly as the op does: same clip, rounding and seed.
    const float clip = layer->stats.grad_clip;
    EXPECT_EQ(clip, sr ? dsgc_search(dy).clip : int8_absmax(dy));
    const Int8Rounding r = sr ? Int8Rounding::stochastic : Int8Rounding::nearest;
    const uint64_t seed = int8_backward_seed(99, 0);
    Tensor dyh = dequantized64(dy, clip, r, seed);
    Tensor xh = dequantized64(x, int8_absmax(x)).requires_grad_(true);
    Tensor wh = dequantized64(w, int8_absmax(w)).requires_grad_(true);
    conv2d(xh, wh, {}, cc.opts).backward(dyh);
    Tensor xa = abs(xh.detach()).requires_grad_(true), wa = abs(wh.detach()).requires_grad_(true);
    conv2d(xa, wa, {}, cc.opts).backward(abs(dyh));
    const std::string tag = cc.name + (sr ? " (SR, DSGC)" : " (RTN)");
    expect_within(x.grad(), xh.grad(), xa.grad(), tag + " dx");
    expect_within(w.grad(), wh.grad(), wa.grad(), tag + " dw");
    if (cc.bias) expect_bias_grad(b.grad(), dy, {0, 2, 3}, tag);
    EXPECT_EQ(layer->stats.backward_steps, 1);
    EXPECT_EQ(layer->stats.searches, sr ? 1 : 0);
    EXPECT_NEAR(layer->stats.cos_distance, cosine_distance(dy, clip, r, seed), 1e-12) << tag;
  }
}

INSTANTIATE_TEST_SUITE_P(Int8Conv, Int8ConvValues, ::testing::ValuesIn(conv_cases()),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return info.param.name; });

// One forward+backward; returns y, dx, dw as vectors.
std::vector<std::vector<float>> run_once(const ConvCase& cc, bool stochastic) {
  Tensor x = random({cc.n, cc.c, cc.h, cc.w}, 21).requires_grad_(true);
  Tensor w = random({cc.k, cc.c / cc.opts.groups_, cc.r, cc.s}, 22, 0.2).requires_grad_(true);
  auto layer = std::make_shared<Int8Layer>();
  layer->config.stochastic_rounding_ = stochastic;
  layer->seed = 5;
  Tensor y = int8_conv2d(x, w, {}, cc.opts, layer);
  y.backward(random(y.shape(), 23));
  return {y.to_vector<float>(), x.grad().to_vector<float>(), w.grad().to_vector<float>()};
}

TEST(Int8Conv, DeterministicAcrossThreadsAndGemmPaths) {
  const int saved_threads = get_num_threads();
  const cpu::Int8GemmPath saved_path = cpu::int8_gemm_path();
  for (const ConvCase& cc : {ConvCase{"general", 4, 6, 23, 19, 10, 3, 3, Conv2dOptions().padding(1)},
                             ConvCase{"strided", 4, 6, 23, 19, 10, 3, 3, Conv2dOptions().stride(2).padding(1)},
                             ConvCase{"depthwise", 4, 8, 23, 19, 8, 3, 3, Conv2dOptions().padding(1).groups(8)}}) {
    set_num_threads(1);
    auto one = run_once(cc, true);
    set_num_threads(2);
    auto two = run_once(cc, true);
    cpu::set_int8_gemm_path(cpu::Int8GemmPath::reference);
    auto plain = run_once(cc, true);
    cpu::set_int8_gemm_path(saved_path);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(one[i], two[i]) << cc.name << " output " << i;
      EXPECT_EQ(one[i], plain[i]) << cc.name << " output " << i;
    }
  }
  set_num_threads(saved_threads);
}

// The INT8 kernels are compiled per ISA (core/cpu/isa.h, simd_dispatch): every copy gives the
// portable copy's bits -- quantizers (nearest and stochastic), absmax, dequantization, DSGC's
// cosine sums and the conv kernels (GEMM reference loops and depthwise) -- on every geometry.
TEST(Int8Conv, EveryIsaGivesThePortableBits) {
  octet::testing::IsaScope isa_scope;
  const cpu::Int8GemmPath saved_path = cpu::int8_gemm_path();
  cpu::set_int8_gemm_path(cpu::Int8GemmPath::reference);  // its row loops are per-ISA too
  auto run_all = [] {
    std::vector<std::vector<float>> out;
    for (const ConvCase& cc : conv_cases())
      for (bool stochastic : {false, true})
        for (auto& v : run_once(cc, stochastic)) out.push_back(std::move(v));
    // Odd lengths, values on rounding boundaries and beyond the clip.
    for (int64_t n : {1, 7, 63, 1001, 100003}) {
      Tensor x = random({n}, 40 + static_cast<uint64_t>(n), 3.0);
      const float clip = int8_absmax(x) * 0.7f;
      out.push_back({int8_absmax(x), static_cast<float>(cosine_distance(x, clip)),
                     static_cast<float>(cosine_distance(x, clip, Int8Rounding::stochastic, 9))});
      for (Int8Rounding r : {Int8Rounding::nearest, Int8Rounding::stochastic}) {
        Tensor q = int8_quantize(x, clip, r, 11);
        out.push_back(q.to(DType::f32).to_vector<float>());
        out.push_back(int8_dequantize(q, clip).to_vector<float>());
      }
    }
    return out;
  };
  octet::cpu::set_active_isa(octet::cpu::Isa::portable);
  const auto portable = run_all();
  for (octet::cpu::Isa isa : {octet::cpu::Isa::avx2, octet::cpu::Isa::avx512}) {
    if (!octet::cpu::isa_supported(isa)) continue;
    octet::cpu::set_active_isa(isa);
    const auto got = run_all();
    ASSERT_EQ(got.size(), portable.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], portable[i]) << octet::cpu::isa_name(isa) << ", result " << i;
  }
  cpu::set_int8_gemm_path(saved_path);
}

// An INT8 Linear's rescale of its int32 sums [K, positions] into [positions, K] rows: the AVX2
// 4 x 4 register blocks give the plain loops' bits, on ranges that start and end off the blocks,
// with and without a bias, sums up to +-2^30 (rounded to f32 the same way).
TEST(Int8Conv, TransposedRescaleAvx2GivesThePlainBits) {
#ifdef OCTET_CPU_X86
  if (!octet::cpu::isa_supported(octet::cpu::Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t ny = 50, k_rows = 21, ldo = 23;
  std::vector<int32_t> y(static_cast<size_t>(ny * k_rows));
  Generator gen(5);
  const std::vector<double> u = rand({static_cast<int64_t>(y.size())}, DType::f64, &gen).to_vector<double>();
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>((u[i] - 0.5) * 2.0 * (1 << 30));
  std::vector<float> bias(static_cast<size_t>(k_rows));
  for (int64_t k = 0; k < k_rows; ++k) bias[static_cast<size_t>(k)] = 0.37f * static_cast<float>(k) - 3.1f;
  struct Range {
    int64_t j0, j1, k0, k1;
  };
  for (const Range& r :
       {Range{0, 50, 0, 21}, Range{5, 42, 3, 18}, Range{7, 9, 2, 5}, Range{0, 4, 0, 4}, Range{3, 3, 0, 8}}) {
    for (const float* b : {static_cast<const float*>(nullptr), static_cast<const float*>(bias.data())}) {
      std::vector<float> want(static_cast<size_t>(ny * ldo), -1.0f), got = want;
      quant::cpu::detail::rescale_transposed(y.data(), ny, r.j0, r.j1, r.k0, r.k1, 1.5e-7f, b, want.data(), ldo);
      quant::cpu::detail::rescale_transposed_avx2(y.data(), ny, r.j0, r.j1, r.k0, r.k1, 1.5e-7f, b, got.data(), ldo);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
            << "j " << r.j0 << ".." << r.j1 << ", k " << r.k0 << ".." << r.k1 << (b ? ", bias" : "") << ": element "
            << i << " " << got[i] << " vs " << want[i];
    }
  }
#else
  GTEST_SKIP() << "not an x86 build";
#endif
}

// The two depthwise layouts (quant/cpu/int8_conv.h: planes, channels_last) give the same bits --
// output, dx, dw, through the op with stochastic rounding and a bias -- on every ISA and thread
// count: the shared depthwise geometries (strides, dilation, padding beyond the kernel, 5x5) and
// channel counts across several 32-lane blocks with a partial last one. Depthwise convs with K = m*C
// run planes whatever the setting (checked through the same comparison).
TEST(Int8Conv, DepthwiseLayoutsGiveTheSameBits) {
  std::vector<ConvCase> cases;
  for (const ConvCase& c : conv_cases())
    if (c.opts.groups_ == c.c) cases.push_back(c);
  cases.push_back({"lanes_37", 3, 37, 5, 6, 37, 3, 3, Conv2dOptions().padding(1).groups(37)});
  cases.push_back({"lanes_70_s2", 2, 70, 9, 7, 70, 3, 3, Conv2dOptions().stride(2).padding(1).groups(70)});
  cases.push_back({"lanes_33_5x5_dilated", 2, 33, 9, 8, 33, 5, 3,
                   Conv2dOptions().stride(1, 2).padding(2, 3).dilation(1, 2).groups(33)});
  cases.push_back({"lanes_64_4x4", 5, 64, 4, 4, 64, 3, 3, Conv2dOptions().padding(1).groups(64)});
  auto run = [&](const ConvCase& cc) {
    Tensor x = random({cc.n, cc.c, cc.h, cc.w}, 61).requires_grad_(true);
    Tensor w = random({cc.k, 1, cc.r, cc.s}, 62, 0.2).requires_grad_(true);
    Tensor b = random({cc.k}, 63);
    auto layer = std::make_shared<Int8Layer>();
    layer->seed = 3;
    Tensor y = int8_conv2d(x, w, b, cc.opts, layer);
    y.backward(random(y.shape(), 64));
    return std::vector<std::vector<float>>{y.to_vector<float>(), x.grad().to_vector<float>(),
                                           w.grad().to_vector<float>()};
  };
  octet::testing::IsaScope isa_scope;
  const cpu::Int8DepthwiseLayout saved_layout = cpu::int8_depthwise_layout();
  const int saved_threads = get_num_threads();
  for (const ConvCase& cc : cases) {
    octet::cpu::set_active_isa(octet::cpu::Isa::portable);
    cpu::set_int8_depthwise_layout(cpu::Int8DepthwiseLayout::planes);
    const auto want = run(cc);
    for (octet::cpu::Isa isa : {octet::cpu::Isa::portable, octet::cpu::Isa::avx2, octet::cpu::Isa::avx512}) {
      if (!octet::cpu::isa_supported(isa)) continue;
      octet::cpu::set_active_isa(isa);
      for (auto layout : {cpu::Int8DepthwiseLayout::channels_last, cpu::Int8DepthwiseLayout::automatic})
        for (int threads : {1, 2}) {
          cpu::set_int8_depthwise_layout(layout);
          set_num_threads(threads);
          const auto got = run(cc);
          for (int i = 0; i < 3; ++i)
            ASSERT_EQ(got[i], want[i]) << cc.name << " " << octet::cpu::isa_name(isa) << " "
                                       << cpu::int8_depthwise_selector().name(layout) << " threads " << threads
                                       << " result " << i;
        }
    }
  }
  cpu::set_int8_depthwise_layout(saved_layout);
  set_num_threads(saved_threads);
}

// The automatic layout: channels_last for K == C on planes of at most kDepthwiseLanesMaxPlane
// positions (kDepthwiseLanesMaxStridedPlane with a stride), planes on larger ones and for K = m*C.
TEST(Int8Conv, DepthwiseLayoutChoice) {
  const cpu::Int8DepthwiseLayout saved = cpu::set_int8_depthwise_layout(cpu::Int8DepthwiseLayout::automatic);
  auto geometry = [](int64_t c, int64_t k, int64_t side, int64_t stride = 1) {
    return int8_conv_geometry({"g", 2, c, side, side, k, 3, 3, Conv2dOptions().stride(stride).padding(1).groups(c)});
  };
  static_assert(cpu::kDepthwiseLanesMaxPlane == 14 * 14 && cpu::kDepthwiseLanesMaxStridedPlane == 24 * 24);
  EXPECT_EQ(cpu::depthwise_layout_for(geometry(96, 96, 14)), cpu::Int8DepthwiseLayout::channels_last);
  EXPECT_EQ(cpu::depthwise_layout_for(geometry(96, 96, 4)), cpu::Int8DepthwiseLayout::channels_last);
  EXPECT_EQ(cpu::depthwise_layout_for(geometry(96, 96, 15)), cpu::Int8DepthwiseLayout::planes);
  EXPECT_EQ(cpu::depthwise_layout_for(geometry(96, 96, 24, 2)), cpu::Int8DepthwiseLayout::channels_last);
  EXPECT_EQ(cpu::depthwise_layout_for(geometry(96, 96, 25, 2)), cpu::Int8DepthwiseLayout::planes);
  EXPECT_EQ(cpu::depthwise_layout_for(geometry(96, 192, 4)), cpu::Int8DepthwiseLayout::planes);
  cpu::set_int8_depthwise_layout(cpu::Int8DepthwiseLayout::channels_last);
  EXPECT_EQ(cpu::depthwise_layout_for(geometry(96, 96, 64)), cpu::Int8DepthwiseLayout::channels_last);
  EXPECT_EQ(cpu::depthwise_layout_for(geometry(96, 192, 4)), cpu::Int8DepthwiseLayout::planes);
  cpu::set_int8_depthwise_layout(cpu::Int8DepthwiseLayout::planes);
  EXPECT_EQ(cpu::depthwise_layout_for(geometry(96, 96, 4)), cpu::Int8DepthwiseLayout::planes);
  EXPECT_EQ(cpu::int8_depthwise_selector().parse("channels_last"), cpu::Int8DepthwiseLayout::channels_last);
  EXPECT_THROW(cpu::int8_depthwise_selector().parse("nhwc"), Error);
  cpu::set_int8_depthwise_layout(saved);
}

TEST(Int8Conv, StatsAndSearchSchedule) {
  Tensor x = random({2, 3, 8, 8}, 31).requires_grad_(true), w = random({4, 3, 3, 3}, 32).requires_grad_(true);
  auto layer = std::make_shared<Int8Layer>();
  layer->config.clip_update_period_ = 2;
  layer->seed = 17;
  EXPECT_TRUE(std::isnan(layer->stats.cos_distance));
  std::vector<float> clips;
  for (int t = 0; t < 5; ++t) {
    Tensor y = int8_conv2d(x, w, {}, Conv2dOptions().padding(1), layer);
    Tensor dy = random(y.shape(), 40 + t, 1.0 + t);  // the gradient's scale drifts
    y.backward(dy);
    clips.push_back(layer->stats.grad_clip);
    const float want_clip = t % 2 == 0 ? dsgc_search(dy).clip : clips[t - 1];
    EXPECT_EQ(layer->stats.grad_clip, want_clip) << "step " << t;
    EXPECT_NEAR(layer->stats.cos_distance,
                cosine_distance(dy, want_clip, Int8Rounding::stochastic, int8_backward_seed(17, t)), 1e-12);
  }
  EXPECT_EQ(layer->stats.backward_steps, 5);
  EXPECT_EQ(layer->stats.searches, 3);  // steps 0, 2, 4
  EXPECT_GT(layer->stats.input_clip, 0.0f);
  EXPECT_GT(layer->stats.weight_clip, 0.0f);
}

// quant.clip_relative: between two searches the clip is the searched clip's ratio to max|dy| times
// max|dy| now, so it follows a gradient whose scale drifts; a layer without a ratio (a checkpoint
// from before it) searches at once.
TEST(Int8Conv, RelativeClipFollowsTheGradientsScale) {
  Tensor x = random({2, 3, 8, 8}, 31).requires_grad_(true), w = random({4, 3, 3, 3}, 32).requires_grad_(true);
  auto layer = std::make_shared<Int8Layer>();
  layer->config.clip_update_period_ = 3;
  layer->config.clip_relative_ = true;
  layer->seed = 17;
  float ratio = 0.0f;
  for (int t = 0; t < 5; ++t) {
    Tensor y = int8_conv2d(x, w, {}, Conv2dOptions().padding(1), layer);
    Tensor dy = random(y.shape(), 40 + t, std::pow(8.0, t));  // the gradient's scale grows 8x a step
    y.backward(dy);
    const float m = int8_absmax(dy);
    float want_clip = 0.0f;
    if (t % 3 == 0) {
      want_clip = dsgc_search(dy).clip;
      ratio = want_clip / m;
    } else {
      want_clip = ratio * m;
    }
    EXPECT_EQ(layer->stats.grad_clip, want_clip) << "step " << t;
    EXPECT_EQ(layer->stats.clip_ratio, ratio) << "step " << t;
    const double d = cosine_distance(dy, want_clip, Int8Rounding::stochastic, int8_backward_seed(17, t));
    EXPECT_NEAR(layer->stats.cos_distance, d, 1e-12);
    EXPECT_LT(d, 0.05) << "step " << t;  // an absolute clip 8x too small would saturate most of dy
  }
  EXPECT_EQ(layer->stats.searches, 2);  // steps 0 and 3
  // No ratio (e.g. restored from an older checkpoint) at a step between searches: it searches.
  layer->stats.clip_ratio = 0.0f;
  Tensor y = int8_conv2d(x, w, {}, Conv2dOptions().padding(1), layer);
  Tensor dy = random(y.shape(), 60, 1.0);
  y.backward(dy);
  EXPECT_EQ(layer->stats.searches, 3);
  EXPECT_EQ(layer->stats.grad_clip, dsgc_search(dy).clip);
}

TEST(Int8Conv, ZeroGradientAtSearchStepSearchesAgain) {
  Tensor x = random({1, 2, 5, 5}, 51).requires_grad_(true), w = random({3, 2, 3, 3}, 52);
  auto layer = std::make_shared<Int8Layer>();
  Tensor y = int8_conv2d(x, w, {}, Conv2dOptions(), layer);
  y.backward(zeros(y.shape()));
  EXPECT_EQ(layer->stats.grad_clip, 0.0f);
  EXPECT_EQ(layer->stats.cos_distance, 0.0);
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(x.numel(), 0.0f));
  y = int8_conv2d(x, w, {}, Conv2dOptions(), layer);
  y.backward(random(y.shape(), 53));
  EXPECT_EQ(layer->stats.searches, 2);  // step 1 is not a period boundary, but clip 0 is stale
  EXPECT_GT(layer->stats.grad_clip, 0.0f);
}

TEST(Int8Conv, GradOnlyForInputsThatNeedIt) {
  Tensor x = random({1, 2, 5, 5}, 61), w = random({3, 2, 3, 3}, 62).requires_grad_(true), b = random({3}, 63);
  auto layer = std::make_shared<Int8Layer>();
  sum(int8_conv2d(x, w, b, Conv2dOptions(), layer)).backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  // Only the bias needs a gradient: no quantization, no stats.
  Tensor w2 = random({3, 2, 3, 3}, 64), b2 = random({3}, 65).requires_grad_(true);
  auto layer2 = std::make_shared<Int8Layer>();
  sum(int8_conv2d(x, w2, b2, Conv2dOptions(), layer2)).backward();
  EXPECT_EQ(b2.grad().to_vector<float>(), std::vector<float>(3, 9.0f));  // 3x3 outputs per channel
  EXPECT_EQ(layer2->stats.backward_steps, 0);
  // No input needs a gradient: no node.
  EXPECT_FALSE(int8_conv2d(x, w2, {}, Conv2dOptions(), layer2).requires_grad());
}

TEST(Int8Conv, NonFiniteValuesPropagate) {
  std::vector<float> xv = random({1, 2, 6, 6}, 71).to_vector<float>();
  xv[7] = std::numeric_limits<float>::quiet_NaN();
  Tensor x = from_vector<float>(xv, {1, 2, 6, 6}), w = random({3, 2, 3, 3}, 72).requires_grad_(true);
  auto layer = std::make_shared<Int8Layer>();
  Tensor y = int8_conv2d(x, w, {}, Conv2dOptions().padding(1), layer);
  for (float v : y.to_vector<float>()) ASSERT_TRUE(std::isnan(v));
  // A NaN in dy with a reused (finite) clip: the gradients turn NaN, not silently zero.
  Tensor x2 = random({1, 2, 6, 6}, 73).requires_grad_(true);
  layer->config.dsgc_ = true;
  layer->config.clip_update_period_ = 100;
  int8_conv2d(x2, w, {}, Conv2dOptions().padding(1), layer).backward(random({1, 3, 6, 6}, 74));
  ASSERT_TRUE(std::isfinite(layer->stats.grad_clip));
  std::vector<float> dyv = random({1, 3, 6, 6}, 75).to_vector<float>();
  dyv[3] = std::numeric_limits<float>::infinity();
  int8_conv2d(x2, w, {}, Conv2dOptions().padding(1), layer).backward(from_vector<float>(dyv, {1, 3, 6, 6}));
  for (float v : x2.grad().to_vector<float>()) ASSERT_TRUE(std::isnan(v));
  EXPECT_TRUE(std::isnan(layer->stats.cos_distance));
}

// 2 * 300 * 300 = 180,000 positions of all-maximal codes: dw sums 180,000 * 127^2 > 2^31 (and
// in the depthwise kernels one sample alone exceeds 2^17 positions for 1 x 400 x 400), in both depthwise layouts.
TEST(Int8Conv, WeightGradientBeyondInt32) {
  const cpu::Int8DepthwiseLayout saved = cpu::int8_depthwise_layout();
  for (auto layout : {cpu::Int8DepthwiseLayout::planes, cpu::Int8DepthwiseLayout::channels_last}) {
    cpu::set_int8_depthwise_layout(layout);  // both depthwise kernels; the GEMM path either way
    for (auto [n, hw, groups] : {std::tuple<int64_t, int64_t, int64_t>{2, 300, 1}, {2, 300, 2}, {1, 400, 2}}) {
      const double positions = double(n * hw * hw);
      Tensor x = full({n, 2, hw, hw}, 1.0), w = full({2, 2 / groups, 1, 1}, 1.0).requires_grad_(true);
      auto layer = rtn_layer();
      Tensor y = int8_conv2d(x, w, {}, Conv2dOptions().groups(groups), layer);
      y.backward(full(y.shape(), 1.0));
      // codes 127 * 127 per position, rescaled by (1/127)^2: the gradient is the position count.
      for (float v : w.grad().to_vector<float>())
        EXPECT_NEAR(v, positions, positions * 1e-6)
            << "groups " << groups << ", " << cpu::int8_depthwise_selector().name(layout);
    }
  }
  cpu::set_int8_depthwise_layout(saved);
}

TEST(Int8Conv, RejectsBadInputs) {
  auto layer = std::make_shared<Int8Layer>();
  Tensor x = random({1, 2, 5, 5}, 81), w = random({3, 2, 3, 3}, 82);
  EXPECT_THROW(int8_conv2d(x, w, {}, {}, nullptr), Error);
  EXPECT_THROW(int8_conv2d(x.to(DType::f64), w.to(DType::f64), {}, {}, layer), Error);
  EXPECT_THROW(int8_conv2d(x.flatten(), w, {}, {}, layer), Error);
  EXPECT_THROW(int8_conv2d(x, random({3, 3, 3, 3}, 83), {}, {}, layer), Error);
  EXPECT_THROW(int8_conv2d(x, w, random({4}, 84), {}, layer), Error);
  EXPECT_THROW(int8_conv2d(x, w, {}, Conv2dOptions().stride(0), layer), Error);
  EXPECT_THROW(int8_conv2d(x, w, {}, Conv2dOptions().groups(3), layer), Error);
  EXPECT_THROW(int8_conv2d(x, random({3, 2, 7, 7}, 85), {}, {}, layer), Error);
  layer->config.clip_update_period_ = 0;
  EXPECT_THROW(int8_conv2d(x, w, {}, {}, layer), Error);
  try {
    int8_conv2d(x, w, {}, {}, nullptr);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("int8_conv2d"), std::string::npos) << e.what();
  }
}

// The CUDA kernel path setting (quant/int8_conv.h): names, parsing, the process-wide switch; the
// CPU kernels ignore it.
TEST(Int8Conv, CudaPathSetting) {
  for (Int8ConvPath p : {Int8ConvPath::automatic, Int8ConvPath::dp4a, Int8ConvPath::tensor_core, Int8ConvPath::direct})
    EXPECT_EQ(parse_int8_conv_path(int8_conv_path_name(p)), p);
  EXPECT_EQ(parse_int8_conv_path("automatic"), Int8ConvPath::automatic);
  EXPECT_EQ(int8_conv_path_name(Int8ConvPath::tensor_core), "tensor_core");
  try {
    parse_int8_conv_path("fastest");
    ADD_FAILURE() << "no error for an unknown path";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fastest'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(set_int8_conv_path(static_cast<Int8ConvPath>(9)), Error);

  Tensor x = random({2, 3, 6, 6}, 91), w = random({4, 3, 3, 3}, 92);
  auto layer = std::make_shared<Int8Layer>();
  const std::vector<float> before = int8_conv2d(x, w, {}, Conv2dOptions().padding(1), layer).to_vector<float>();
  const Int8ConvPath saved = set_int8_conv_path(Int8ConvPath::tensor_core);
  EXPECT_EQ(int8_conv_path(), Int8ConvPath::tensor_core);
  EXPECT_EQ(int8_conv2d(x, w, {}, Conv2dOptions().padding(1), layer).to_vector<float>(), before);
  EXPECT_EQ(set_int8_conv_path(saved), Int8ConvPath::tensor_core);
  for (Int8ConvPath p : int8_conv_last_paths(x, w, Conv2dOptions().padding(1)))
    EXPECT_EQ(p, Int8ConvPath::automatic);  // nothing to choose on the CPU
}

}  // namespace
}  // namespace octet::quant
