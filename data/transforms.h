// Image transforms on f32 [C,H,W] tensors, torchvision style. Every random choice is drawn from
// the Generator passed in (never from global state), so an augmented example is reproducible.
//   Transform t = compose({random_crop(32, 32, 4), random_horizontal_flip(),
//                          normalize({0.49f, 0.48f, 0.45f}, {0.25f, 0.24f, 0.26f})});
//   Generator g(1);  Tensor y = t(x, g);
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace octet {

using Transform = std::function<Tensor(const Tensor& img, Generator& rng)>;

// Applies the transforms left to right; empty entries are skipped.
Transform compose(std::vector<Transform> transforms);

// Pads every side with `padding` zeros, then takes a uniformly placed size_h x size_w window
// (torchvision RandomCrop(size, padding)).
Transform random_crop(int64_t size_h, int64_t size_w, int64_t padding = 0);
// Mirrors left-right with probability p.
Transform random_horizontal_flip(double p = 0.5);
// (x - mean[c]) / std[c] per channel; one value applies to every channel.
Transform normalize(std::vector<float> mean, std::vector<float> std);
// torchvision RandomResizedCrop: up to 10 draws of an area fraction in `scale` and a log-uniform
// aspect ratio in `ratio`, falling back to a center crop clamped to `ratio`; the crop is then
// resized bilinearly to size x size.
Transform random_resized_crop(int64_t size, std::array<double, 2> scale = {0.08, 1.0},
                              std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0});
// Bilinear resize (half-pixel centers, as PyTorch's align_corners=false) WITHOUT antialiasing:
// strong downscaling aliases, as torchvision's antialias=False does. One size scales the shorter
// side to `short_side` and the longer one to int(short_side * long / short).
Transform resize(int64_t short_side);
Transform resize(int64_t h, int64_t w);
// The central h x w window (top = round((H - h) / 2)); zero padding when the image is smaller.
Transform center_crop(int64_t h, int64_t w);

// The same operations as plain functions, for datasets and tests.
// img [C,H,W] -> [C,h,w]: the window at (top, left); outside the image reads as zero.
Tensor crop_image(const Tensor& img, int64_t top, int64_t left, int64_t h, int64_t w);
// img [C,H,W] -> [C,out_h,out_w], bilinear as `resize`.
Tensor resize_image(const Tensor& img, int64_t out_h, int64_t out_w);
// Bilinear resize of the window (top, left, h, w), which must lie inside the image.
Tensor resized_crop_image(const Tensor& img, int64_t top, int64_t left, int64_t h, int64_t w, int64_t out_h,
                          int64_t out_w);
// The (h, w) that `resize(short_side)` gives an image of in_h x in_w.
std::array<int64_t, 2> short_side_size(int64_t in_h, int64_t in_w, int64_t short_side);

}  // namespace octet
