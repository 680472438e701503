// PrecisionBatching (Lam et al., ../shared/papers/precisionbatching.md and NOTES.md): inference of
// y = x W^T + b with n-bit weights (n = 1..8) and k-bit activations (k = 2..32) as a sum of binary
// products, each counted with AND + popcount. This header is the contract shared by the CPU kernels
// (quant/cpu/pbatch.h), the CUDA kernel (quant/cuda/pbatch.h), the layers (PbLinear, the
// PrecisionBatching LSTM) and the exported files; every implementation gives the same integers.
//
// Weights, once, offline (pb_preprocess): a per-tensor step d > 0 and integer codes q, w ~ d * q.
//   n >= 2: d = c / 2^(n-1) for a clip c in (0, max|W|]; q = clamp(nearbyint(W / d), -2^(n-1), 2^(n-1))
//           (W / d in double, ties to even): the paper's grid d = (max - min) / 2^n on a symmetric
//           range, 2^n + 1 levels, which is why n + 1 two's-complement bits hold it.
//   n == 1: no zero level (the paper's 1-bit case): q = (W >= 0 ? +1 : -1), d = c.
//   c = max|W|; with clip search, the c of the candidates c_i = max|W| * i / kPbClipCandidates
//   (i = 1..kPbClipCandidates) minimizing the squared error sum (W - d q)^2 (the largest c on a tie).
//   An all-zero W has d = 1 and q = 0; a non-finite W is an octet::Error.
// Bit-planes: P = n + 1 planes; plane p holds bit p of q in P-bit two's complement, so
//   q = -2^(P-1) b_{P-1} + sum_{p < P-1} 2^p b_p   (the top plane's scale is negative).
//   Plane p's scale is sign_p * 2^p * d. Bits are packed along K: element k is bit (k % 64) of word
//   k / 64; each plane row has pb_words(K) words, the bits past K zero. Layout: i64 tensor
//   [rows, P, words] holding the bit patterns, a row's planes contiguous.
// Activations, per call and per row b of the batch (pb_quantize_activations):
//   m = max|x_b|, s_b = m / (2^(k-1) - 1) (double), xq = clamp(nearbyint(double(x) * ((2^(k-1) - 1) / m)),
//   -(2^(k-1) - 1), 2^(k-1) - 1), k planes like the weights' (plane k-1 the sign, scale -2^(k-1)).
//   A zero row has s_b = 0 and xq = 0. A row with a NaN or an infinity has s_b = NaN: its outputs
//   are NaN (never a silently finite number).
// Product: acc[b,r] = sum_K q[r,K] xq[b,K] = sum over planes p, j of sign_p sign_j 2^(p+j)
//   popcount(W_p[r] AND X_j[b]), an int64 sum, exact (|acc| <= K 2^(n+k-1) < 2^63 for K < 2^23);
//   y[b,r] = float(double(acc) * (d * s_b)) + bias[r] (the last add in float).
//   Up to the rounding of that final scale, y equals the float64 product of the dequantized operands.
//
//
// Two schemes (PbConfig::scheme) make the codes and the scales; the planes and the integer product
// above are the same for both, so every kernel serves both.
//   octet (the default): the step and activation scale above.
//   paper: the PrecisionBatching reference code's arithmetic (its pbatch_linear.py and CUDA kernel;
//     quant/pbatch_paper.h states it). Weights on a power-of-two fixed-point grid: f = trunc(|w'| 2^16),
//     w' = sign(w) min(|w|, t); e = max(ceil(log2 max f) + 1, n) - n; q = sign(w') clamp(floor(f / 2^e
//     + 1/2), 1, 2^n - 1) (a non-zero weight never rounds to 0; 0 stays 0), d = 2^(e - 16); the clip t
//     minimizes the mean |w - d q| over the reference's candidates (quant/pbatch_paper.h).
//     Activations with a static scale (the paper's Algorithm 2): xq = the low k bits of
//     int32(trunc(x 2^a_shift)) as a k-bit two's complement number, so a value past the k-bit range
//     wraps around, as the reference's kernel does (the int32 conversion saturates, as CUDA's);
//     s_b = 2^-a_shift (NaN for a row with a NaN or an infinity, as above).
// Per-row step (PbConfig::row_step, beyond the paper): each output row r gets its own step d_r (its
// own clip search, and for the paper scheme its own exponent); y[b,r] = float(double(acc) * (d_r *
// s_b)) + bias[r], one more multiply per row.
//
//   quant::PbWeights w = quant::pb_preprocess(linear.weight_, /*bits=*/4);   // offline
//   Tensor y = quant::pb_linear(w, x, /*a_bits=*/16, linear.bias_);         // x [B, K] -> [B, N]
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace octet::quant {

inline constexpr int kPbMaxWeightBits = 8;
inline constexpr int kPbMinActivationBits = 2;
inline constexpr int kPbMaxActivationBits = 32;
inline constexpr int64_t kPbClipCandidates = 100;
// Plane rows are padded to whole 512-bit vectors (8 words), so kernels load them without a tail.
inline constexpr int64_t kPbWordAlign = 8;
// K must stay below this for the int64 sum to be exact.
inline constexpr int64_t kPbMaxCols = int64_t{1} << 23;

// 64-bit words per plane row for K elements: ceil(K / 512) * 8.
inline int64_t pb_words(int64_t cols) { return (cols + 64 * kPbWordAlign - 1) / (64 * kPbWordAlign) * kPbWordAlign; }

// How codes and scales are made (see above); the names are the plan files' `scheme:` values.
enum class PbScheme : uint8_t { octet, paper };
std::string_view pb_scheme_name(PbScheme s);  // "octet" or "paper"
// The reference code's default act_shift, 2^6.
inline constexpr int kPbPaperActShift = 6;
inline constexpr int kPbMaxActShift = 30;

// One layer's precisions: weight bits 1..8, activation bits 2..32.
struct PbConfig {
  int w_bits = 4;
  int a_bits = 16;
  bool clip_search = true;  // the scheme's clip search over the weights
  PbScheme scheme = PbScheme::octet;
  bool row_step = false;           // a weight step per output row
  int a_shift = kPbPaperActShift;  // paper scheme: activations fixed point at 2^-a_shift (0..30)

  bool operator==(const PbConfig&) const = default;
};
// An octet::Error naming `what` (e.g. the layer) for bits out of range.
void check_pb_config(const PbConfig& c, const std::string& what);
// "w4a16"; the paper scheme adds "-paper" (and "-s<a_shift>" for a shift other than 6), a per-row
// step "-row": "w4a8-paper-row". The clip search is not named (it changes only the preprocessing).
std::string pb_config_name(const PbConfig& c);

// Preprocessed weights of one matrix W [rows, cols].
struct PbWeights {
  int64_t rows = 0, cols = 0;
  int bits = 0;       // n
  double step = 0.0;  // d (per-tensor step; with row_steps, their largest)
  Tensor planes;      // i64 [rows, bits + 1, pb_words(cols)]
  Tensor row_steps;   // f64 [rows] on the planes' device: d_r per row; undefined: `step` for every row
  // 1-bit weights whose codes are all +-1 (plane 0 all ones on the columns): the kernels skip plane 0.
  // The octet scheme's always are; the paper scheme's are unless a weight is exactly 0 (code 0).
  bool plane0_ones = false;

  int num_planes() const { return bits + 1; }
  int64_t words() const { return pb_words(cols); }
  // Plane p's scale: +-2^p * step (negative for the top plane).
  double plane_scale(int p) const;
  // The same weights on device d (the planes copied).
  PbWeights to(Device d) const;
};

// The step d for W (n bits, with or without clip search), per the definition above.
double pb_weight_step(const float* w, int64_t n, int bits, bool clip_search);
// q[i] for W[i] at step d (the definition's rounding and clamp), n bits.
void pb_weight_codes(const float* w, int64_t n, int bits, double step, int32_t* q);
// W f32 [rows, cols] (any device; read on the host) -> planes on W's device. An Error for a bad
// shape, bits outside 1..8, cols >= kPbMaxCols or a non-finite weight.
PbWeights pb_preprocess(const Tensor& w, int bits, bool clip_search = true);
// The same for any scheme and step granularity (c.a_bits, c.a_shift unused).
PbWeights pb_preprocess(const Tensor& w, const PbConfig& c);
// Whether 1-bit planes have plane 0 all ones on the columns (PbWeights::plane0_ones), read on the host.
bool pb_plane0_all_ones(const Tensor& planes, int64_t cols);
// The integer codes the planes hold, int32 [rows, cols] on the CPU (decoded from the bit-planes).
Tensor pb_decode(const PbWeights& w);

// Activations of one call, bit-transposed.
struct PbActivations {
  int64_t batch = 0, cols = 0;
  int bits = 0;   // k
  Tensor planes;  // i64 [batch, bits, pb_words(cols)]
  Tensor scale;   // f64 [batch]: s_b (NaN for a row with a non-finite value)
};
// x f32 [batch, cols] contiguous -> its planes, on x's device (the octet scheme's dynamic scale).
PbActivations pb_quantize_activations(const Tensor& x, int bits);
// The same with c's scheme: c.a_bits bits, for the paper scheme the static scale 2^-c.a_shift.
PbActivations pb_quantize_activations(const Tensor& x, const PbConfig& c);
// int32 codes xq of x [batch, cols] (the definition above), on the CPU: the tests' reference.
Tensor pb_activation_codes(const Tensor& x, int bits);
Tensor pb_activation_codes(const Tensor& x, const PbConfig& c);

// y [batch, rows] f32 = the PrecisionBatching product of x [batch, cols] and w, plus bias [rows]
// (undefined: none). Any batch (the kernels run chunks of up to kPbMaxBatch rows at once); x, the
// planes and bias on one device. An Error for mismatched shapes or devices.
inline constexpr int64_t kPbMaxBatch = 8;
Tensor pb_linear(const PbWeights& w, const Tensor& x, int a_bits, const Tensor& bias = Tensor());
// With c's activation scheme (c.a_bits, c.scheme, c.a_shift).
Tensor pb_linear(const PbWeights& w, const Tensor& x, const PbConfig& c, const Tensor& bias = Tensor());
// The same from already quantized activations.
Tensor pb_linear(const PbWeights& w, const PbActivations& x, const Tensor& bias = Tensor());

// float64 reference: y = sum_K (d q[r,K]) (s_b xq[b,K]) + bias, from the codes; for tests.
Tensor pb_linear_reference(const PbWeights& w, const Tensor& x, int a_bits, const Tensor& bias = Tensor());
Tensor pb_linear_reference(const PbWeights& w, const Tensor& x, const PbConfig& c, const Tensor& bias = Tensor());

}  // namespace octet::quant
