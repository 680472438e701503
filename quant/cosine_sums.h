// The statistics of a quantization g -> q that give its cosine distance, shared by the CPU and
// CUDA kernels (which compute them) and by DSGC and the INT8 layers (which read them).
//   CosineSums s = dispatch::rounded_sums(g, inv, Int8Rounding::nearest, 0);  double d = cosine_distance(s);
#pragma once

namespace octet::quant {

// cos(g, q) = gq / sqrt(gg * qq) (scale cancels). Each product is exact in double (24 x 8 bits);
// sums run in double in a fixed order.
struct CosineSums {
  double gq = 0, gg = 0, qq = 0;
  bool finite = true;  // every g was finite

  CosineSums& operator+=(const CosineSums& o) {
    gq += o.gq, gg += o.gg, qq += o.qq, finite = finite && o.finite;
    return *this;
  }
};

// 1 - cos(g, q) clamped to [0, 2]; 0 when g is all zeros (quantized exactly), 1 when g is not but
// q is; NaN when some g was not finite.
double cosine_distance(const CosineSums& s);

}  // namespace octet::quant
