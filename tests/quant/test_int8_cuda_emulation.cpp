// The CUDA INT8 convolution run on the CPU: every path of quant/cuda/int8_conv_paths.h (dp4a,
// tensor_core, direct) driven by a host executor that runs each map functor as a loop, the DP4A
// kernel's blocks one by one through the same phases (quant/cuda/int8_dp4a.h: tile loads, dp4a
// sums, stores; all threads of a phase before the next, as __syncthreads orders them), the
// depthwise dw sums, and the tensor-core GEMMs as cuBLASLt defines them ("TN", checking its layout
// rules and 16-byte alignment), over scratch memory filled with garbage. Forward, dx and dw must
// equal the CPU kernels (quant/cpu/int8_conv.h) bit for bit for the same codes. This checks, on
// any machine, the index math, packing, tiling, padding, blocking and rescaling of the GPU paths;
// what it cannot check is the launches themselves, CUDA's intrinsics and cuBLASLt (tests/cuda/ on a
// GPU).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/octet.h"
#include "quant/cpu/int8_conv.h"
#include "quant/cpu/int8_quant.h"
#include "quant/cuda/int8_conv_paths.h"
#include "quant/cuda/int8_dp4a.h"
#include "quant/int8_tensor.h"
#include "tests/quant/int8_conv_cases.h"

namespace octet::quant {
namespace {

namespace ops = cuda::ops;
namespace paths = cuda::paths;
using kernels::Conv2dGeometry;

class HostExec {
 public:
  explicit HostExec(int64_t block_bytes) : block_bytes_(block_bytes) {}

  // Exactly n elements (so that AddressSanitizer, in the int8_emulation_asan test, sees a read past
  // the end), 16-byte aligned by malloc as the GEMM checks need, filled with a garbage pattern
  // (device memory is not zeroed either).
  template <class T>
  T* scratch(int64_t n) {
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T);
    void* p = std::malloc(bytes);
    std::memset(p, 0xa5, bytes);
    buffers_.emplace_back(p, &std::free);
    return static_cast<T*>(p);
  }
  template <class T>
  void zero(T* p, int64_t n) {
    std::memset(p, 0, static_cast<size_t>(n) * sizeof(T));
  }
  template <class F>
  void map(int64_t n, const F& f) {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
  // The CUDA kernel's blocks one after another, each running its 256 threads phase by phase
  // (all loads of a step, then all accumulations), as __syncthreads orders them on the GPU.
  template <class Ops>
  void dp4a(const Ops& op, int64_t split_words) {
    const ops::Dp4aGrid grid = ops::dp4a_grid(op, split_words);
    for (int64_t z = 0; z < grid.groups * grid.splits; ++z)
      for (int64_t y = 0; y < grid.y; ++y)
        for (int64_t x = 0; x < grid.x; ++x) {
          const ops::Dp4aBlock blk = ops::dp4a_block(op, x, y, z, 0, split_words, grid.splits);
          int32_t sums[ops::kTileThreads][4][4] = {};
          ops::Dp4aTile tile;
          std::memset(&tile, 0xa5, sizeof tile);
          for (int64_t u0 = blk.u_begin; u0 < blk.u_end; u0 += ops::kTileWords) {
            for (int t = 0; t < ops::kTileThreads; ++t) ops::dp4a_load(op, blk, u0, t, tile);
            for (int t = 0; t < ops::kTileThreads; ++t) ops::dp4a_accumulate(tile, t, sums[t]);
          }
          for (int t = 0; t < ops::kTileThreads; ++t) ops::dp4a_store(op, blk, t, sums[t]);
          ++dp4a_blocks;
        }
  }
  template <class Terms>
  void sum_rows(const Terms& terms, int64_t* acc) {
    constexpr int64_t kRun = 4096;
    for (int64_t row = 0; row < terms.rows(); ++row)
      for (int64_t j0 = 0; j0 < terms.cols(); j0 += kRun) {
        int32_t s = 0;
        for (int64_t j = j0; j < std::min(terms.cols(), j0 + kRun); ++j) s += terms(row, j);
        acc[row] += s;
      }
  }
  int64_t block_bytes() const { return block_bytes_; }
  bool gemm_supported(const ops::Int8Gemm& g) { return ops::follows_int8_gemm_rules(g); }
  void gemm(const ops::Int8Gemm& g, const int8_t* a, const int8_t* b, int32_t* c) {
    EXPECT_TRUE(ops::follows_int8_gemm_rules(g));
    EXPECT_EQ(g.m % 16, 0);
    EXPECT_EQ(g.lda % 16 + g.ldb % 16 + g.ldc % 16, 0);
    for (const void* p : {static_cast<const void*>(a), static_cast<const void*>(b), static_cast<const void*>(c)})
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u) << "a GEMM operand is not 16-byte aligned";
    ++gemms;
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        int32_t s = 0;
        for (int64_t t = 0; t < g.k; ++t) s += int32_t{a[i * g.lda + t]} * int32_t{b[j * g.ldb + t]};
        c[j * g.ldc + i] = s;
      }
  }

  int64_t gemms = 0, dp4a_blocks = 0;

 private:
  int64_t block_bytes_;
  std::vector<std::unique_ptr<void, void (*)(void*)>> buffers_;
};

// The shared geometries, plus one with 2 * 50 * 50 = 5000 output positions: two dw splits of
// 4096 (DP4A) and many blocks of positions (tensor core).
std::vector<Int8ConvCase> cases() {
  std::vector<Int8ConvCase> all = int8_conv_cases();
  all.push_back({"many_positions", 2, 3, 50, 50, 4, 3, 3, Conv2dOptions().padding(1)});
  return all;
}

// Seeded values; "saturated" clamps them to +-scale, so every code is +-127.
Tensor values(const Shape& shape, uint64_t seed, double scale) {
  Generator gen(seed);
  Tensor t = randn(shape, {}, &gen);
  if (scale > 1.0) t = sign(t) * scale;
  return t.contiguous();
}

// Element-by-element bit equality of n floats.
::testing::AssertionResult same_bits(const float* got, const Tensor& want, const std::string& what) {
  const float* w = want.data<float>();
  for (int64_t i = 0; i < want.numel(); ++i)
    if (std::memcmp(got + i, w + i, 4) != 0)
      return ::testing::AssertionFailure() << what << ": element " << i << " of " << want.numel() << " is " << got[i]
                                           << ", the CPU kernel gives " << w[i];
  return ::testing::AssertionSuccess();
}

// The operands and the CPU kernels' results of one case.
struct Reference {
  Conv2dGeometry g;
  Tensor x, w, bias, dy;
  float inv_x = 0, scale_fwd = 0, scale_dx = 0, scale_dw = 0;
  Tensor wq, dyq;  // i8 [K,C/g,R,S], [K,N,P,Q] (channel-major, as the CPU keeps it)
  Tensor out, dx, dw;
};

Reference reference(const Int8ConvCase& c) {
  Reference r;
  const Conv2dGeometry& g = r.g = int8_conv_geometry(c);
  r.x = values({g.n, g.c, g.h, g.w}, 1, c.scale);
  r.w = values({g.k, g.c / g.groups, g.r, g.s}, 2, c.scale);
  r.dy = values({g.n, g.k, g.p, g.q}, 3, c.scale);
  r.bias = c.bias ? values({g.k}, 4, 1.0) : Tensor();
  const float cx = int8_absmax(r.x), cw = int8_absmax(r.w), cdy = int8_absmax(r.dy) * 0.7f;  // a clip that saturates
  r.inv_x = int8_inv_scale(cx);
  r.scale_fwd = int8_scale(cx) * int8_scale(cw);
  r.scale_dx = int8_scale(cdy) * int8_scale(cw);
  r.scale_dw = int8_scale(cdy) * int8_scale(cx);
  Tensor xq = empty({g.c, g.n, g.h, g.w}, DType::i8);
  cpu::quantize_transposed(r.x.data<float>(), g.n, g.c, g.h * g.w, r.inv_x, Int8Rounding::nearest, 0,
                           xq.data<int8_t>());
  r.wq = int8_quantize(r.w, cw);
  r.dyq = empty({g.k, g.n, g.p, g.q}, DType::i8);
  cpu::quantize_transposed(r.dy.data<float>(), g.n, g.k, g.p * g.q, int8_inv_scale(cdy), Int8Rounding::stochastic, 77,
                           r.dyq.data<int8_t>());
  r.out = empty({g.n, g.k, g.p, g.q}, DType::f32);
  r.dx = empty({g.n, g.c, g.h, g.w}, DType::f32);
  r.dw = empty(r.w.shape(), DType::f32);
  cpu::int8_conv2d_forward(g, xq, r.wq, r.scale_fwd, r.bias, r.out);
  cpu::int8_conv2d_backward_input(g, r.dyq, r.wq, r.scale_dx, r.dx);
  cpu::int8_conv2d_backward_weight(g, xq, r.dyq, r.scale_dw, r.dw);
  return r;
}

// dy's codes as the CUDA kernels read them: rows of ld = N*P*Q rounded up to 16, zero-padded.
int8_t* device_dy(HostExec& ex, const Reference& r, int64_t* ld) {
  const int64_t total = ops::positions(r.g);
  *ld = ops::dy_ld(r.g);
  int8_t* d = ex.scratch<int8_t>(r.g.k * *ld);
  for (int64_t k = 0; k < r.g.k; ++k) {
    std::memcpy(d + k * *ld, r.dyq.data<int8_t>() + k * total, static_cast<size_t>(total));
    std::memset(d + k * *ld + total, 0, static_cast<size_t>(*ld - total));
  }
  return d;
}

// A tiny tensor-core block budget, so the paths run several blocks of samples and of positions.
constexpr int64_t kSmallBlockBytes = 4096;

class Int8KernelEmulation : public ::testing::TestWithParam<Int8ConvCase> {};

TEST_P(Int8KernelEmulation, ForwardEveryPathMatchesCpu) {
  const Reference r = reference(GetParam());
  const bool depthwise = ops::is_depthwise(r.g);
  HostExec ex(kSmallBlockBytes);
  const float* bias = r.bias.defined() ? r.bias.data<float>() : nullptr;
  auto args = [&](float* out) {
    return paths::ForwardArgs{r.g, r.x.data<float>(), r.inv_x, r.wq.data<int8_t>(), r.scale_fwd, bias, out};
  };
  float* out = ex.scratch<float>(r.out.numel());
  ASSERT_TRUE(paths::forward_dp4a(ex, args(out)));
  EXPECT_TRUE(same_bits(out, r.out, "dp4a forward"));
  out = ex.scratch<float>(r.out.numel());
  ASSERT_TRUE(paths::forward_tensor_core(ex, args(out)));
  EXPECT_TRUE(same_bits(out, r.out, "tensor_core forward"));
  EXPECT_GE(ex.gemms, r.g.groups);
  out = ex.scratch<float>(r.out.numel());
  ASSERT_EQ(paths::forward_direct(ex, args(out)), depthwise);
  if (depthwise) {
    EXPECT_TRUE(same_bits(out, r.out, "direct forward"));
  }
}

TEST_P(Int8KernelEmulation, BackwardInputEveryPathMatchesCpu) {
  const Reference r = reference(GetParam());
  const bool depthwise = ops::is_depthwise(r.g);
  HostExec ex(kSmallBlockBytes);
  int64_t ld = 0;
  const int8_t* dy = device_dy(ex, r, &ld);
  auto args = [&](float* dx) { return paths::BackwardInputArgs{r.g, dy, ld, r.wq.data<int8_t>(), r.scale_dx, dx}; };
  float* dx = ex.scratch<float>(r.dx.numel());
  ASSERT_TRUE(paths::backward_input_dp4a(ex, args(dx)));
  EXPECT_TRUE(same_bits(dx, r.dx, "dp4a dx"));
  dx = ex.scratch<float>(r.dx.numel());
  ASSERT_TRUE(paths::backward_input_tensor_core(ex, args(dx)));
  EXPECT_TRUE(same_bits(dx, r.dx, "tensor_core dx"));
  dx = ex.scratch<float>(r.dx.numel());
  ASSERT_EQ(paths::backward_input_direct(ex, args(dx)), depthwise);
  if (depthwise) {
    EXPECT_TRUE(same_bits(dx, r.dx, "direct dx"));
  }
}

TEST_P(Int8KernelEmulation, BackwardWeightEveryPathMatchesCpu) {
  const Reference r = reference(GetParam());
  const bool depthwise = ops::is_depthwise(r.g);
  HostExec ex(kSmallBlockBytes);
  int64_t ld = 0;
  const int8_t* dy = device_dy(ex, r, &ld);
  auto args = [&](float* dw) {
    return paths::BackwardWeightArgs{r.g, r.x.data<float>(), r.inv_x, dy, ld, r.scale_dw, dw};
  };
  float* dw = ex.scratch<float>(r.dw.numel());
  ASSERT_TRUE(paths::backward_weight_dp4a(ex, args(dw)));
  EXPECT_TRUE(same_bits(dw, r.dw, "dp4a dw"));
  dw = ex.scratch<float>(r.dw.numel());
  ASSERT_TRUE(paths::backward_weight_tensor_core(ex, args(dw)));
  EXPECT_TRUE(same_bits(dw, r.dw, "tensor_core dw"));
  dw = ex.scratch<float>(r.dw.numel());
  ASSERT_EQ(paths::backward_weight_direct(ex, args(dw)), depthwise);
  if (depthwise) {
    EXPECT_TRUE(same_bits(dw, r.dw, "direct dw"));
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, Int8KernelEmulation, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Int8ConvCase>& info) { return info.param.name; });

TEST(Int8KernelEmulationWords, PackAndDp4aKeepSignsAndExtremes) {
  EXPECT_EQ(ops::pack4(1, 2, 3, 4), 0x04030201);
  EXPECT_EQ(ops::pack4(-1, 0, 0, 0), 0x000000ff);
  EXPECT_EQ(ops::pack4(-128, 127, -127, 0), static_cast<int32_t>(0x00817f80u));
  // dp4a: signed bytes, accumulated onto c.
  EXPECT_EQ(ops::dp4a(ops::pack4(-128, -128, -128, -128), ops::pack4(-128, -128, -128, -128), 5), 5 + 4 * 16384);
  EXPECT_EQ(ops::dp4a(ops::pack4(127, -127, 1, -1), ops::pack4(127, 127, -1, -1), 0), 127 * 127 - 127 * 127 - 1 + 1);
  EXPECT_EQ(ops::dp4a(ops::pack4(-127, -127, -127, -127), ops::pack4(127, 127, 127, 127), -7), -7 - 4 * 16129);
}

TEST(Int8KernelEmulationWords, DivisionsIn32And64Bits) {
  for (int64_t a : {int64_t{0}, int64_t{7}, int64_t{2147483647}, int64_t{2147483648}, int64_t{1} << 40, int64_t{-7}})
    for (int64_t b : {int64_t{1}, int64_t{3}, int64_t{2147483647}, int64_t{2147483648}, int64_t{1} << 33}) {
      EXPECT_EQ(ops::idiv(a, b), a / b) << a << " / " << b;
      EXPECT_EQ(ops::imod(a, b), a % b) << a << " % " << b;
    }
}

TEST(Int8KernelEmulationWords, TapSourceInvertsTheConvolution) {
  // Every (output position, tap) reaches exactly the input it reads, and nothing else maps back.
  for (const Int8ConvCase& c : cases()) {
    const Conv2dGeometry g = int8_conv_geometry(c);
    int64_t hits = 0, expected = 0;
    for (int64_t p = 0; p < g.p; ++p)
      for (int64_t q = 0; q < g.q; ++q)
        for (int64_t r = 0; r < g.r; ++r)
          for (int64_t s = 0; s < g.s; ++s) {
            const int64_t h = p * g.stride_h - g.pad_h + r * g.dil_h, w = q * g.stride_w - g.pad_w + s * g.dil_w;
            if (h >= 0 && h < g.h && w >= 0 && w < g.w) ++expected;
          }
    for (int64_t h = 0; h < g.h; ++h)
      for (int64_t w = 0; w < g.w; ++w)
        for (int64_t r = 0; r < g.r; ++r)
          for (int64_t s = 0; s < g.s; ++s) {
            int64_t p, q;
            if (!ops::tap_source(g, h, w, r, s, p, q)) continue;
            ++hits;
            EXPECT_EQ(p * g.stride_h - g.pad_h + r * g.dil_h, h) << c.name;
            EXPECT_EQ(q * g.stride_w - g.pad_w + s * g.dil_w, w) << c.name;
          }
    EXPECT_EQ(hits, expected) << c.name;
  }
}

TEST(Int8KernelEmulationWords, DyRowsAreWholeAlignedWords) {
  Conv2dGeometry g{};
  g.n = 3, g.p = 5, g.q = 7;  // 105 positions
  EXPECT_EQ(ops::dy_ld(g), 112);
  g.n = 1, g.p = 4, g.q = 4;
  EXPECT_EQ(ops::dy_ld(g), 16);
  static_assert(4 * ops::kDwSplitWords <= ops::kMaxInt32Terms);
}

}  // namespace
}  // namespace octet::quant
