// The CUDA PrecisionBatching kernels run on the CPU: every thread of every block of
// quant/cuda/pbatch.cu driven through its per-thread functions (quant/cuda/pbatch_kernels.h), with
// the warp collectives it uses (__ballot_sync, the xor shuffle butterfly) emulated over the 32 lanes,
// over scratch filled with garbage (device memory is not zeroed), for both quantization schemes. Planes, scales, int64
// sums and float outputs must equal the CPU kernels (quant/cpu/pbatch.h, pb_linear) bit for bit, on odd sizes. This
// checks the index math, padding, batching and arithmetic of the GPU code on any machine; the launches, the intrinsics
// and the warp collectives need a GPU (tests/cuda/test_cuda_pbatch.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/octet.h"
#include "quant/cpu/pbatch.h"
#include "quant/cuda/pbatch_kernels.h"
#include "quant/pbatch.h"
#include "tests/quant/same_bytes.h"

namespace octet::quant {
namespace {

namespace pb = cuda::pb;

constexpr uint64_t kGarbage = 0xa5a5a5a5a5a5a5a5ull;

// Streams the arguments into one string (a case's name in messages).
template <class... T>
std::string cat(const T&... v) {
  std::ostringstream os;
  (os << ... << v);
  return os.str();
}

// Seeded N(0, 1) rows with the special rows the definition names: row 1 all zeros (when batch > 1),
// a NaN in row 2 and an infinity in row 3 (when there are such rows), ties of the rounding (x = 0.5
// at a scale that makes it exact), and values at +-max.
std::vector<float> activations(int64_t batch, int64_t cols, uint64_t seed, bool special) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch * cols));
  for (float& v : x) v = nd(rng);
  if (!special) return x;
  auto row = [&](int64_t b) { return x.data() + b * cols; };
  if (batch > 1)
    for (int64_t c = 0; c < cols; ++c) row(1)[c] = 0.0f;
  if (batch > 2) row(2)[cols / 2] = std::numeric_limits<float>::quiet_NaN();
  if (batch > 3) row(3)[cols - 1] = -std::numeric_limits<float>::infinity();
  if (batch > 4 && cols > 3) {  // max 3 at k = 2 (qmax 1): 1.5 and -1.5 are ties
    row(4)[0] = 3.0f, row(4)[1] = 1.5f, row(4)[2] = -1.5f, row(4)[3] = -3.0f;
  }
  return x;
}

// ---------------------------------------------------------------- PrecisionBatching quantizer

// pb_quantize_kernel on the host: block b = row b; the max over its threads (any order: a max);
// then warp by warp, word by word, the 32 lanes' codes and the ballots of each plane.
// shift >= 0: the paper scheme's static scale (pb_row_scale_fixed), as the kernel's shift argument.
void emulate_pb_quantize(const float* x, int64_t batch, int64_t cols, int bits, uint64_t* planes, double* scale,
                         int shift = -1) {
  const int64_t words = pb_words(cols);
  const int warps = pb::kThreads / pb::kWarp;
  for (int64_t row = 0; row < batch; ++row) {
    const float* xr = x + row * cols;
    uint32_t m = 0;
    for (int t = 0; t < pb::kThreads; ++t)
      for (int64_t c = t; c < cols; c += pb::kThreads) m = std::max(m, pb::pb_abs_bits(xr[c]));
    const pb::PbRowScale s = shift >= 0 ? pb::pb_row_scale_fixed(m, shift) : pb::pb_row_scale(m, bits);
    scale[row] = s.scale;
    uint64_t* pr = planes + row * bits * words;
    for (int warp = 0; warp < warps; ++warp)
      for (int64_t w = warp; w < words; w += warps) {
        int32_t lo[pb::kWarp], hi[pb::kWarp];
        for (int lane = 0; lane < pb::kWarp; ++lane) pb::pb_column_codes(xr, cols, w, lane, s, lo[lane], hi[lane]);
        uint64_t mine[pb::kWarp] = {};
        for (int j = 0; j < bits; ++j) {
          uint32_t bl = 0, bh = 0;  // __ballot_sync: bit `lane` from lane `lane`
          for (int lane = 0; lane < pb::kWarp; ++lane) {
            bl |= static_cast<uint32_t>(pb::pb_code_bit(lo[lane], j)) << lane;
            bh |= static_cast<uint32_t>(pb::pb_code_bit(hi[lane], j)) << lane;
          }
          mine[j] = pb::pb_plane_word(bl, bh);  // lane j keeps plane j's word
        }
        for (int lane = 0; lane < bits; ++lane) pr[lane * words + w] = mine[lane];
      }
  }
}

using testing::same_bytes;

TEST(PbKernelEmulation, QuantizerMatchesCpu) {
  for (int bits : {2, 3, 5, 8, 16, 31, 32})
    for (int64_t cols : {1, 4, 63, 64, 65, 511, 512, 513, 1100})
      for (int64_t batch : {1, 6}) {
        const std::vector<float> x = activations(batch, cols, 100 * bits + cols + batch, true);
        const int64_t words = pb_words(cols), n = batch * bits * words;
        std::vector<uint64_t> got(static_cast<size_t>(n), kGarbage), want(static_cast<size_t>(n), kGarbage);
        std::vector<double> gs(static_cast<size_t>(batch), 7.0), ws(static_cast<size_t>(batch), 7.0);
        emulate_pb_quantize(x.data(), batch, cols, bits, got.data(), gs.data());
        cpu::pb_quantize(x.data(), batch, cols, bits, want.data(), ws.data());
        const std::string what = cat("k=", bits, " cols=", cols, " batch=", batch);
        EXPECT_TRUE(same_bytes(got.data(), want.data(), n, 8, what + " planes"));
        EXPECT_TRUE(same_bytes(gs.data(), ws.data(), batch, 8, what + " scales"));
      }
}

// The paper scheme's quantizer: int32(trunc(x 2^shift)) saturated, its low k bits (the wrap), scale
// 2^-shift; with values past the k-bit range and past int32.
TEST(PbKernelEmulation, FixedQuantizerMatchesCpu) {
  for (int bits : {2, 8, 16, 32})
    for (int shift : {0, 6, 20})
      for (int64_t cols : {1, 63, 65, 513})
        for (int64_t batch : {1, 6}) {
          std::vector<float> x = activations(batch, cols, 10 * bits + cols + batch + shift, true);
          x[0] *= 1.0e6f;  // past int32 at shift 20, past 8 bits at 6
          if (cols > 2) x[2] = -3.0e9f;
          const int64_t words = pb_words(cols), n = batch * bits * words;
          std::vector<uint64_t> got(static_cast<size_t>(n), kGarbage), want(static_cast<size_t>(n), kGarbage);
          std::vector<double> gs(static_cast<size_t>(batch), 7.0), ws(static_cast<size_t>(batch), 7.0);
          emulate_pb_quantize(x.data(), batch, cols, bits, got.data(), gs.data(), shift);
          cpu::pb_quantize_fixed(x.data(), batch, cols, bits, shift, want.data(), ws.data());
          const std::string what = cat("k=", bits, " shift=", shift, " cols=", cols, " batch=", batch);
          EXPECT_TRUE(same_bytes(got.data(), want.data(), n, 8, what + " planes"));
          EXPECT_TRUE(same_bytes(gs.data(), ws.data(), batch, 8, what + " scales"));
        }
  const pb::PbRowScale s = pb::pb_row_scale_fixed(0, 6);
  EXPECT_EQ(s.scale, 1.0 / 64);
  EXPECT_EQ(pb::pb_code(-7.3f, s), -467);
  EXPECT_EQ(pb::pb_code(3.0e9f, s), INT32_MAX);
  EXPECT_TRUE(std::isnan(pb::pb_row_scale_fixed(pb::kInfBits + 1, 6).scale));
}

TEST(PbKernelEmulation, RowScaleFollowsTheDefinition) {
  const float m = 0.75f;
  uint32_t bits_m;
  std::memcpy(&bits_m, &m, 4);
  const pb::PbRowScale s = pb::pb_row_scale(bits_m, 16);
  EXPECT_EQ(s.scale, 0.75 / 32767.0);
  EXPECT_EQ(s.factor, 32767.0 / 0.75);
  EXPECT_EQ(pb::pb_code(0.75f, s), 32767);
  EXPECT_EQ(pb::pb_code(-0.75f, s), -32767);
  EXPECT_EQ(pb::pb_row_scale(0, 8).scale, 0.0);
  EXPECT_TRUE(std::isnan(pb::pb_row_scale(pb::kInfBits, 8).scale));
  EXPECT_EQ(pb::pb_lanes_per_row(8), 8);
  EXPECT_EQ(pb::pb_lanes_per_row(16), 16);
  EXPECT_EQ(pb::pb_lanes_per_row(24), 16);
  EXPECT_EQ(pb::pb_lanes_per_row(40), 32);
}

// ---------------------------------------------------------------- PrecisionBatching product

template <int P, int First = 0>
void lane_sums(const pb::PbGemmArgs& a, int64_t r, int lane, int lanes, int64_t (&acc)[kPbMaxBatch]) {
  pb::pb_lane_sums<P, First>(a, r, lane, lanes, acc);
}

void lane_sums_of(int planes, bool plane0_ones, const pb::PbGemmArgs& a, int64_t r, int lane, int lanes,
                  int64_t (&acc)[kPbMaxBatch]) {
  switch (planes) {
    case 2:  // 1-bit: plane 0 from the code sums when it is all ones
      return plane0_ones ? lane_sums<2, 1>(a, r, lane, lanes, acc) : lane_sums<2>(a, r, lane, lanes, acc);
    case 3:
      return lane_sums<3>(a, r, lane, lanes, acc);
    case 4:
      return lane_sums<4>(a, r, lane, lanes, acc);
    case 5:
      return lane_sums<5>(a, r, lane, lanes, acc);
    case 6:
      return lane_sums<6>(a, r, lane, lanes, acc);
    case 7:
      return lane_sums<7>(a, r, lane, lanes, acc);
    case 8:
      return lane_sums<8>(a, r, lane, lanes, acc);
    case 9:
      return lane_sums<9>(a, r, lane, lanes, acc);
    default:
      FAIL() << planes << " planes";
  }
}

// pb_gemm_kernel on the host over the whole grid (x: blocks of rows, y: chunks of kPbMaxBatch), warp
// by warp: each lane's sums, the xor butterfly over `lanes` (rows past the end taking part with
// zeros), then lane b of each row writing output b; also returns the sums.
void emulate_pb_gemm(const PbWeights& w, const PbActivations& x, const float* bias, float* y, int64_t* acc_out) {
  const int64_t words = w.words(), rows = w.rows, batch = x.batch;
  const int lanes = pb::pb_lanes_per_row(words);
  const int64_t blocks = pb::pb_gemm_blocks(rows, lanes), chunks = (batch + kPbMaxBatch - 1) / kPbMaxBatch;
  const auto* wp = static_cast<const uint64_t*>(w.planes.raw_data());
  const auto* xp = static_cast<const uint64_t*>(x.planes.raw_data());
  const double* scale = x.scale.data<double>();
  // pb_code_sum_kernel (1-bit weights): one warp per batch row, the xor butterfly over its 32 lanes.
  std::vector<int64_t> code_sums(static_cast<size_t>(batch), 0);
  if (w.bits == 1 && w.plane0_ones)
    for (int64_t b = 0; b < batch; ++b) {
      int64_t lane_sum[pb::kWarp];
      for (int l = 0; l < pb::kWarp; ++l)
        lane_sum[l] = pb::pb_lane_code_sum(xp + b * x.bits * words, x.bits, words, l, pb::kWarp);
      for (int o = pb::kWarp / 2; o > 0; o >>= 1) {
        int64_t v[pb::kWarp];
        for (int l = 0; l < pb::kWarp; ++l) v[l] = pb::pb_add(lane_sum[l], lane_sum[l ^ o]);
        for (int l = 0; l < pb::kWarp; ++l) lane_sum[l] = v[l];
      }
      code_sums[static_cast<size_t>(b)] = lane_sum[0];
    }
  for (int64_t by = 0; by < chunks; ++by)
    for (int64_t bx = 0; bx < blocks; ++bx)
      for (int warp = 0; warp < pb::kThreads / pb::kWarp; ++warp) {
        const int64_t b0 = by * kPbMaxBatch, nb = std::min(kPbMaxBatch, batch - b0);
        const pb::PbGemmArgs a{wp, rows, words, xp + b0 * x.bits * words, nb, x.bits};
        int64_t acc[pb::kWarp][kPbMaxBatch] = {};
        pb::PbThread th[pb::kWarp];
        for (int l = 0; l < pb::kWarp; ++l) {
          th[l] = pb::pb_thread(bx * pb::kThreads + warp * pb::kWarp + l, lanes);
          if (th[l].row < rows) lane_sums_of(w.num_planes(), w.plane0_ones, a, th[l].row, th[l].lane, lanes, acc[l]);
        }
        for (int b = 0; b < static_cast<int>(kPbMaxBatch); ++b)
          for (int o = lanes / 2; o > 0; o >>= 1) {
            int64_t v[pb::kWarp];
            for (int l = 0; l < pb::kWarp; ++l) v[l] = pb::pb_add(acc[l][b], acc[l ^ o][b]);
            for (int l = 0; l < pb::kWarp; ++l) acc[l][b] = v[l];
          }
        for (int l = 0; l < pb::kWarp; ++l) {
          if (th[l].row >= rows || th[l].lane >= nb) continue;
          const int64_t b = b0 + th[l].lane, r = th[l].row;
          const int64_t total = pb::pb_add(acc[l][th[l].lane], code_sums[static_cast<size_t>(b)]);
          const double* steps = w.row_steps.defined() ? w.row_steps.data<double>() : nullptr;
          y[b * rows + r] = pb::pb_output(total, w.step, steps, scale[b], bias, r);
          acc_out[b * rows + r] = total;
        }
      }
}

// Random planes (bits past cols zero, as pb_preprocess and pb_quantize leave them); for 1-bit
// weights (codes +-1) plane 0 is all ones on the columns, as pb_preprocess makes it.
Tensor random_planes(int64_t rows, int planes, int64_t cols, uint64_t seed, bool one_bit = false) {
  const int64_t words = pb_words(cols);
  Tensor t = empty({rows, planes, words}, DType::i64);
  auto* p = static_cast<uint64_t*>(t.raw_data());
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t u = i % words, first = 64 * u;
    uint64_t v = one_bit && (i / words) % planes == 0 ? ~uint64_t{0} : rng();
    if (first >= cols)
      v = 0;
    else if (cols - first < 64)
      v &= (uint64_t{1} << (cols - first)) - 1;
    p[i] = v;
  }
  return t;
}

TEST(PbKernelEmulation, ProductMatchesCpu) {
  struct Shape3 {
    int64_t rows, cols;
  };
  for (int n_bits = 1; n_bits <= kPbMaxWeightBits; ++n_bits)
    for (int k_bits : {2, 7, 16, 32})
      for (const Shape3 sh : {Shape3{1, 1}, Shape3{5, 70}, Shape3{13, 600}, Shape3{9, 1100}, Shape3{33, 2100}})
        for (int64_t batch : {1, 3, 8, 11}) {
          // Words 8, 16 and 32+ (8, 16 and 32 lanes a row) at every precision; the large shapes
          // (several word iterations per lane) only at a few, to keep the test fast.
          if (sh.cols > 1000 && (batch != 11 || (n_bits + k_bits) % 3 != 0)) continue;
          PbWeights w;
          w.rows = sh.rows, w.cols = sh.cols, w.bits = n_bits, w.step = 0.01 * n_bits + 1e-3;
          w.planes = random_planes(sh.rows, n_bits + 1, sh.cols, 7 * n_bits + sh.cols, n_bits == 1);
          w.plane0_ones = n_bits == 1;
          PbActivations x;
          x.batch = batch, x.cols = sh.cols, x.bits = k_bits;
          x.planes = random_planes(batch, k_bits, sh.cols, 11 * k_bits + batch);
          std::vector<double> sv(static_cast<size_t>(batch));
          for (int64_t b = 0; b < batch; ++b) sv[static_cast<size_t>(b)] = 1.0 / (b + 3);
          if (batch > 2) sv[2] = std::numeric_limits<double>::quiet_NaN();
          if (batch > 1) sv[1] = 0.0;
          x.scale = from_vector(sv, {batch});
          Tensor bias = from_vector(activations(1, sh.rows, 5, false), {sh.rows});
          const std::string what =
              cat("n=", n_bits, " k=", k_bits, " rows=", sh.rows, " cols=", sh.cols, " batch=", batch);
          for (bool with_bias : {false, true}) {
            const Tensor b = with_bias ? bias : Tensor();
            std::vector<float> y(static_cast<size_t>(batch * sh.rows));
            std::vector<int64_t> acc(y.size());
            std::memset(y.data(), 0xa5, y.size() * 4);
            emulate_pb_gemm(w, x, with_bias ? bias.data<float>() : nullptr, y.data(), acc.data());
            // The CPU's sums, chunk by chunk, and its outputs.
            std::vector<int64_t> want(acc.size());
            for (int64_t b0 = 0; b0 < batch; b0 += kPbMaxBatch)
              cpu::pb_gemm(static_cast<const uint64_t*>(w.planes.raw_data()), sh.rows, n_bits + 1, w.words(),
                           static_cast<const uint64_t*>(x.planes.raw_data()) + b0 * k_bits * w.words(),
                           std::min(kPbMaxBatch, batch - b0), k_bits, want.data() + b0 * sh.rows);
            EXPECT_TRUE(same_bytes(acc.data(), want.data(), batch * sh.rows, 8, what + " sums"));
            Tensor yw = pb_linear(w, x, b);
            EXPECT_TRUE(same_bytes(y.data(), yw.data<float>(), batch * sh.rows, 4,
                                   what + (with_bias ? " outputs with bias" : " outputs")));
          }
        }
}

// Quantizer, product and output together against the CPU's pb_linear from floats, for both schemes
// with and without the per-row step (1-bit paper weights with zero codes: plane 0 read).
TEST(PbKernelEmulation, LinearMatchesCpu) {
  for (int variant = 0; variant < 4; ++variant)
    for (int n_bits : {1, 4, 8})
      for (int k_bits : {2, 8, 16})
        for (int64_t cols : {3, 129, 777})
          for (int64_t batch : {1, 5, 9}) {
            const int64_t rows = 2 * cols % 37 + 3;
            std::vector<float> wv = activations(rows, cols, 3 + cols, false);
            wv[1] = 0.0f;
            Tensor wf = from_vector(wv, {rows, cols});
            PbConfig c;
            c.w_bits = n_bits, c.a_bits = k_bits;
            c.scheme = variant % 2 ? PbScheme::paper : PbScheme::octet;
            c.row_step = variant >= 2;
            const PbWeights w = pb_preprocess(wf, c);
            Tensor x = from_vector(activations(batch, cols, 9 + batch, true), {batch, cols});
            Tensor bias = from_vector(activations(1, rows, 13, false), {rows});
            PbActivations a;
            a.batch = batch, a.cols = cols, a.bits = k_bits;
            a.planes = empty({batch, k_bits, pb_words(cols)}, DType::i64);
            a.scale = empty({batch}, DType::f64);
            emulate_pb_quantize(x.data<float>(), batch, cols, k_bits, static_cast<uint64_t*>(a.planes.raw_data()),
                                a.scale.data<double>(), c.scheme == PbScheme::paper ? c.a_shift : -1);
            std::vector<float> y(static_cast<size_t>(batch * rows));
            std::vector<int64_t> acc(y.size());
            emulate_pb_gemm(w, a, bias.data<float>(), y.data(), acc.data());
            Tensor want = pb_linear(w, x, c, bias);
            EXPECT_TRUE(same_bytes(y.data(), want.data<float>(), batch * rows, 4,
                                   cat(pb_config_name(c), " cols=", cols, " batch=", batch)));
          }
}

}  // namespace
}  // namespace octet::quant
