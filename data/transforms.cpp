#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace octet {
namespace {

// Transforms take f32 [C,H,W]; returns a contiguous handle to the same data where possible.
Tensor checked_image(const Tensor& img, const char* op) {
  OCTET_CHECK(img.defined(), op, ": expected an f32 [C,H,W] image, got an undefined tensor");
  OCTET_CHECK(img.dim() == 3, op, ": expected an f32 [C,H,W] image, got shape ", img.shape());
  OCTET_CHECK(img.dtype() == DType::f32, op, ": expected an f32 [C,H,W] image, got dtype ", img.dtype());
  OCTET_CHECK(img.device().is_cpu(), op, ": expected a CPU image, got device ", img.device());
  return img.contiguous();
}

// Four fresh random words from `g`, consuming one counter.
std::array<uint32_t, 4> draw(Generator& g) { return philox_at(g.seed(), g.advance(1), 0); }

// Uniform integer in [0, n) for 0 < n <= 2^32 (Lemire's multiply-shift).
int64_t uniform_int(uint32_t w, int64_t n) {
  return static_cast<int64_t>((static_cast<uint64_t>(w) * static_cast<uint64_t>(n)) >> 32);
}

double uniform(uint32_t w, double lo, double hi) { return lo + (hi - lo) * uniform_float(w); }

// Source index pairs and weights of a half-pixel-center bilinear resize of n_in -> n_out.
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<float> frac;
};

Taps bilinear_taps(int64_t n_in, int64_t n_out) {
  Taps t;
  t.i0.resize(n_out);
  t.i1.resize(n_out);
  t.frac.resize(n_out);
  double scale = static_cast<double>(n_in) / static_cast<double>(n_out);
  for (int64_t o = 0; o < n_out; ++o) {
    double src = std::max(0.0, (static_cast<double>(o) + 0.5) * scale - 0.5);
    int64_t i0 = std::min(static_cast<int64_t>(src), n_in - 1);
    t.i0[o] = i0;
    t.i1[o] = std::min(i0 + 1, n_in - 1);
    t.frac[o] = static_cast<float>(src - static_cast<double>(i0));
  }
  return t;
}

// Python's round() (half to even), as torchvision uses for center crops.
int64_t round_even(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

int64_t center_offset(int64_t in, int64_t out) {
  // torchvision pads (out - in) // 2 in front when the crop is larger than the image.
  return out > in ? -((out - in) / 2) : round_even(static_cast<double>(in - out) / 2.0);
}

}  // namespace

Tensor crop_image(const Tensor& img, int64_t top, int64_t left, int64_t h, int64_t w) {
  Tensor x = checked_image(img, "crop");
  OCTET_CHECK(h > 0 && w > 0, "crop: expected a positive size, got ", h, "x", w);
  int64_t c = x.size(0), in_h = x.size(1), in_w = x.size(2);
  Tensor out = zeros({c, h, w});
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  int64_t y_begin = std::max<int64_t>(0, -top), y_end = std::min(h, in_h - top);
  int64_t x_begin = std::max<int64_t>(0, -left), x_end = std::min(w, in_w - left);
  if (y_begin >= y_end || x_begin >= x_end) return out;
  size_t row_bytes = static_cast<size_t>(x_end - x_begin) * sizeof(float);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = y_begin; y < y_end; ++y)
      std::memcpy(dst + (ch * h + y) * w + x_begin, src + (ch * in_h + y + top) * in_w + left + x_begin, row_bytes);
  return out;
}

Tensor resized_crop_image(const Tensor& img, int64_t top, int64_t left, int64_t h, int64_t w, int64_t out_h,
                          int64_t out_w) {
  Tensor x = checked_image(img, "resize");
  int64_t c = x.size(0), in_h = x.size(1), in_w = x.size(2);
  OCTET_CHECK(out_h > 0 && out_w > 0, "resize: expected a positive output size, got ", out_h, "x", out_w);
  OCTET_CHECK(h > 0 && w > 0 && top >= 0 && left >= 0 && top + h <= in_h && left + w <= in_w, "resize: window (top ",
              top, ", left ", left, ", ", h, "x", w, ") lies outside the ", in_h, "x", in_w, " image");
  if (top == 0 && left == 0 && h == in_h && w == in_w && out_h == in_h && out_w == in_w) return x.clone();
  Taps ty = bilinear_taps(h, out_h), tx = bilinear_taps(w, out_w);
  Tensor out = empty({c, out_h, out_w});
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    const float* plane = src + (ch * in_h + top) * in_w + left;
    for (int64_t oy = 0; oy < out_h; ++oy) {
      const float* r0 = plane + ty.i0[oy] * in_w;
      const float* r1 = plane + ty.i1[oy] * in_w;
      float fy = ty.frac[oy];
      float* o = dst + (ch * out_h + oy) * out_w;
      for (int64_t ox = 0; ox < out_w; ++ox) {
        int64_t a = tx.i0[ox], b = tx.i1[ox];
        float fx = tx.frac[ox];
        float top_v = r0[a] + (r0[b] - r0[a]) * fx;
        float bot_v = r1[a] + (r1[b] - r1[a]) * fx;
        o[ox] = top_v + (bot_v - top_v) * fy;
      }
    }
  }
  return out;
}

Tensor resize_image(const Tensor& img, int64_t out_h, int64_t out_w) {
  Tensor x = checked_image(img, "resize");
  return resized_crop_image(x, 0, 0, x.size(1), x.size(2), out_h, out_w);
}

std::array<int64_t, 2> short_side_size(int64_t in_h, int64_t in_w, int64_t short_side) {
  OCTET_CHECK(short_side > 0, "resize: expected a positive size, got ", short_side);
  OCTET_CHECK(in_h > 0 && in_w > 0, "resize: expected a non-empty image, got ", in_h, "x", in_w);
  if (in_h <= in_w) return {short_side, std::max<int64_t>(1, short_side * in_w / in_h)};
  return {std::max<int64_t>(1, short_side * in_h / in_w), short_side};
}

Transform compose(std::vector<Transform> transforms) {
  return [ts = std::move(transforms)](const Tensor& img, Generator& rng) {
    Tensor x = img;
    for (const Transform& t : ts)
      if (t) x = t(x, rng);
    return x;
  };
}

Transform random_crop(int64_t size_h, int64_t size_w, int64_t padding) {
  OCTET_CHECK(size_h > 0 && size_w > 0, "random_crop: expected a positive size, got ", size_h, "x", size_w);
  OCTET_CHECK(padding >= 0, "random_crop: expected padding >= 0, got ", padding);
  return [=](const Tensor& img, Generator& rng) {
    Tensor x = checked_image(img, "random_crop");
    int64_t span_h = x.size(1) + 2 * padding - size_h, span_w = x.size(2) + 2 * padding - size_w;
    OCTET_CHECK(span_h >= 0 && span_w >= 0, "random_crop: crop ", size_h, "x", size_w, " is larger than the ",
                x.size(1), "x", x.size(2), " image with padding ", padding);
    auto r = draw(rng);
    int64_t top = uniform_int(r[0], span_h + 1) - padding, left = uniform_int(r[1], span_w + 1) - padding;
    return crop_image(x, top, left, size_h, size_w);
  };
}

Transform random_horizontal_flip(double p) {
  OCTET_CHECK(p >= 0.0 && p <= 1.0, "random_horizontal_flip: expected p in [0, 1], got ", p);
  return [p](const Tensor& img, Generator& rng) {
    Tensor x = checked_image(img, "random_horizontal_flip");
    if (!(uniform_float(draw(rng)[0]) < p)) return x;
    int64_t rows = x.size(0) * x.size(1), w = x.size(2);
    Tensor out = empty(x.shape());
    const float* src = x.data<float>();
    float* dst = out.data<float>();
    for (int64_t r = 0; r < rows; ++r) std::reverse_copy(src + r * w, src + (r + 1) * w, dst + r * w);
    return out;
  };
}

Transform normalize(std::vector<float> mean, std::vector<float> std) {
  OCTET_CHECK(!mean.empty() && mean.size() == std.size(),
              "normalize: expected as many means as stds (at least one), got ", mean.size(), " and ", std.size());
  for (float s : std) OCTET_CHECK(s > 0.0f, "normalize: expected positive stds, got ", s);
  return [mean = std::move(mean), std = std::move(std)](const Tensor& img, Generator&) {
    Tensor x = checked_image(img, "normalize");
    int64_t c = x.size(0), plane = x.size(1) * x.size(2);
    OCTET_CHECK(mean.size() == 1 || static_cast<int64_t>(mean.size()) == c, "normalize: expected ", mean.size(),
                " channels, got image of shape ", x.shape());
    Tensor out = empty(x.shape());
    const float* src = x.data<float>();
    float* dst = out.data<float>();
    for (int64_t ch = 0; ch < c; ++ch) {
      size_t k = mean.size() == 1 ? 0 : static_cast<size_t>(ch);
      float m = mean[k], inv = 1.0f / std[k];
      for (int64_t i = ch * plane; i < (ch + 1) * plane; ++i) dst[i] = (src[i] - m) * inv;
    }
    return out;
  };
}

Transform random_resized_crop(int64_t size, std::array<double, 2> scale, std::array<double, 2> ratio) {
  OCTET_CHECK(size > 0, "random_resized_crop: expected a positive size, got ", size);
  OCTET_CHECK(scale[0] > 0 && scale[0] <= scale[1], "random_resized_crop: expected 0 < scale[0] <= scale[1], got ",
              scale[0], ", ", scale[1]);
  OCTET_CHECK(ratio[0] > 0 && ratio[0] <= ratio[1], "random_resized_crop: expected 0 < ratio[0] <= ratio[1], got ",
              ratio[0], ", ", ratio[1]);
  return [=](const Tensor& img, Generator& rng) {
    constexpr int kAttempts = 10;  // torchvision's
    Tensor x = checked_image(img, "random_resized_crop");
    int64_t in_h = x.size(1), in_w = x.size(2);
    OCTET_CHECK(in_h > 0 && in_w > 0, "random_resized_crop: expected a non-empty image, got ", x.shape());
    double area = static_cast<double>(in_h * in_w);
    double log_lo = std::log(ratio[0]), log_hi = std::log(ratio[1]);
    uint64_t offset = rng.advance(kAttempts);
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      auto r = philox_at(rng.seed(), offset, static_cast<uint64_t>(attempt));
      double target = area * uniform(r[0], scale[0], scale[1]);
      double aspect = std::exp(uniform(r[1], log_lo, log_hi));
      auto w = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
      auto h = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
      if (w <= 0 || h <= 0 || w > in_w || h > in_h) continue;
      int64_t top = uniform_int(r[2], in_h - h + 1), left = uniform_int(r[3], in_w - w + 1);
      return resized_crop_image(x, top, left, h, w, size, size);
    }
    // Fallback: the largest central crop whose aspect ratio lies within `ratio`.
    double in_ratio = static_cast<double>(in_w) / static_cast<double>(in_h);
    int64_t w = in_w, h = in_h;
    if (in_ratio < ratio[0]) {
      h = std::clamp<int64_t>(std::lround(static_cast<double>(in_w) / ratio[0]), 1, in_h);
    } else if (in_ratio > ratio[1]) {
      w = std::clamp<int64_t>(std::lround(static_cast<double>(in_h) * ratio[1]), 1, in_w);
    }
    return resized_crop_image(x, (in_h - h) / 2, (in_w - w) / 2, h, w, size, size);
  };
}

Transform resize(int64_t short_side) {
  OCTET_CHECK(short_side > 0, "resize: expected a positive size, got ", short_side);
  return [short_side](const Tensor& img, Generator&) {
    Tensor x = checked_image(img, "resize");
    auto [h, w] = short_side_size(x.size(1), x.size(2), short_side);
    return resize_image(x, h, w);
  };
}

Transform resize(int64_t h, int64_t w) {
  OCTET_CHECK(h > 0 && w > 0, "resize: expected a positive size, got ", h, "x", w);
  return [h, w](const Tensor& img, Generator&) { return resize_image(img, h, w); };
}

Transform center_crop(int64_t h, int64_t w) {
  OCTET_CHECK(h > 0 && w > 0, "center_crop: expected a positive size, got ", h, "x", w);
  return [h, w](const Tensor& img, Generator&) {
    Tensor x = checked_image(img, "center_crop");
    return crop_image(x, center_offset(x.size(1), h), center_offset(x.size(2), w), h, w);
  };
}

}  // namespace octet
