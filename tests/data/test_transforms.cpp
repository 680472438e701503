// Transforms on small known images: exact values for crops, flips and normalization, the
// torchvision conventions for center crops and bilinear resizing, and reproducible randomness.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/octet.h"
#include "data/transforms.h"

namespace octet {
namespace {

// Bilinear weights are products of float fractions: a few ulps of 1.0.
constexpr float kResizeTol = 1e-6f;

Tensor iota_image(const Shape& shape) { return arange(static_cast<double>(shape_numel(shape))).reshape(shape); }

TEST(DataTransforms, HorizontalFlip) {
  Tensor x = iota_image({2, 2, 3});
  Generator g(0);
  EXPECT_EQ(random_horizontal_flip(1.0)(x, g).to_vector<float>(),
            (std::vector<float>{2, 1, 0, 5, 4, 3, 8, 7, 6, 11, 10, 9}));
  EXPECT_EQ(random_horizontal_flip(0.0)(x, g).to_vector<float>(), x.to_vector<float>());
  // p = 0.5 flips about half the time, decided by the generator alone.
  int flips = 0;
  for (uint64_t s = 0; s < 200; ++s) {
    Generator a(s), b(s);
    Tensor ya = random_horizontal_flip()(x, a), yb = random_horizontal_flip()(x, b);
    EXPECT_EQ(ya.to_vector<float>(), yb.to_vector<float>());
    flips += ya.to_vector<float>()[0] == 2.0f;
  }
  EXPECT_GT(flips, 70);
  EXPECT_LT(flips, 130);
}

TEST(DataTransforms, CropWithPadding) {
  Tensor x = iota_image({1, 3, 3});
  EXPECT_EQ(crop_image(x, -1, -1, 3, 3).to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 0, 1, 0, 3, 4}));
  EXPECT_EQ(crop_image(x, 1, 2, 2, 2).to_vector<float>(), (std::vector<float>{5, 0, 8, 0}));
  EXPECT_EQ(crop_image(x, 5, 5, 1, 1).to_vector<float>(), (std::vector<float>{0}));
  // Each random crop is the window at some offset of the zero-padded image; all offsets occur.
  std::set<std::pair<int64_t, int64_t>> seen;
  for (uint64_t s = 0; s < 300; ++s) {
    Generator g(s);
    std::vector<float> y = random_crop(3, 3, 1)(x, g).to_vector<float>();
    bool found = false;
    for (int64_t top = -1; top <= 1 && !found; ++top)
      for (int64_t left = -1; left <= 1 && !found; ++left)
        if (crop_image(x, top, left, 3, 3).to_vector<float>() == y) {
          found = true;
          seen.insert({top, left});
        }
    EXPECT_TRUE(found) << "seed " << s;
  }
  EXPECT_EQ(seen.size(), 9u);
  Generator g(0);
  EXPECT_EQ(random_crop(2, 3, 0)(iota_image({2, 5, 3}), g).shape(), (Shape{2, 2, 3}));
  EXPECT_THROW(random_crop(5, 5, 0)(x, g), Error);
  EXPECT_THROW(random_crop(2, 2, -1), Error);
}

TEST(DataTransforms, Normalize) {
  Tensor x = from_vector<float>({0.0f, 0.5f, 1.0f, 0.25f}, {2, 1, 2});
  Generator g(0);
  std::vector<float> y = normalize({0.5f, 0.25f}, {0.5f, 0.25f})(x, g).to_vector<float>();
  EXPECT_EQ(y, (std::vector<float>{-1.0f, 0.0f, 3.0f, 0.0f}));
  EXPECT_EQ(normalize({0.5f}, {2.0f})(x, g).to_vector<float>(), (std::vector<float>{-0.25f, 0.0f, 0.25f, -0.125f}));
  EXPECT_THROW(normalize({0.5f, 0.5f, 0.5f}, {1, 1, 1})(x, g), Error);
  EXPECT_THROW(normalize({0.5f}, {0.0f}), Error);
  EXPECT_THROW(normalize({0.5f, 0.5f}, {1.0f}), Error);
}

TEST(DataTransforms, CenterCrop) {
  Generator g(0);
  EXPECT_EQ(center_crop(2, 2)(iota_image({1, 4, 4}), g).to_vector<float>(), (std::vector<float>{5, 6, 9, 10}));
  // (5 - 2) / 2 = 1.5 rounds half to even (Python's round, as torchvision): offset 2.
  EXPECT_EQ(center_crop(2, 1)(iota_image({1, 5, 5}), g).to_vector<float>(), (std::vector<float>{12, 17}));
  // Larger than the image: zero padding, (4 - 2) // 2 = 1 row above and (3 - 2) // 2 = 0 columns left.
  EXPECT_EQ(center_crop(4, 3)(iota_image({1, 2, 2}), g).to_vector<float>(),
            (std::vector<float>{0, 0, 0, 0, 1, 0, 2, 3, 0, 0, 0, 0}));
}

TEST(DataTransforms, ResizeBilinear) {
  Generator g(0);
  // A constant image stays constant whatever the scale.
  Tensor c = full({3, 7, 9}, 0.3);
  for (auto [h, w] : {std::pair<int64_t, int64_t>{4, 5}, {20, 13}, {7, 9}, {1, 1}}) {
    Tensor y = resize(h, w)(c, g);
    ASSERT_EQ(y.shape(), (Shape{3, h, w}));
    for (float v : y.to_vector<float>()) ASSERT_NEAR(v, 0.3f, kResizeTol);
  }
  EXPECT_EQ(resize(5)(c, g).shape(), (Shape{3, 5, 6}));  // short side 7 -> 5, long 9 * 5 / 7 = 6
  EXPECT_EQ(resize(14)(zeros({1, 9, 7}), g).shape(), (Shape{1, 18, 14}));
  // Half-pixel centers (PyTorch align_corners=false): [0, 1] -> [0, 0.25, 0.75, 1].
  std::vector<float> up = resize(1, 4)(from_vector<float>({0, 1}, {1, 1, 2}), g).to_vector<float>();
  std::vector<float> want = {0.0f, 0.25f, 0.75f, 1.0f};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(up[i], want[i], kResizeTol);
  // Halving samples between the pixels: the mean of each 2x2 block.
  std::vector<float> down = resize(1, 2)(iota_image({1, 2, 4}), g).to_vector<float>();
  EXPECT_NEAR(down[0], 2.5f, kResizeTol);
  EXPECT_NEAR(down[1], 4.5f, kResizeTol);
  EXPECT_THROW(resize(0), Error);
  EXPECT_THROW(resize(3)(zeros({3, 4}), g), Error);
  EXPECT_THROW(resize(3)(zeros({1, 3, 4}, DType::f64), g), Error);
}

TEST(DataTransforms, RandomResizedCrop) {
  Tensor x = rand({3, 20, 30});
  for (uint64_t s = 0; s < 50; ++s) {
    Generator a(s), b(s);
    Tensor ya = random_resized_crop(8)(x, a);
    EXPECT_EQ(ya.shape(), (Shape{3, 8, 8}));
    EXPECT_EQ(ya.to_vector<float>(), random_resized_crop(8)(x, b).to_vector<float>());
  }
  // No draw fits (area 100 at aspect 2 needs w = 14 > 10): the fallback is the central crop
  // clamped to the ratio range, here 10 wide and 5 high, resized.
  Tensor sq = rand({1, 10, 10});
  Generator g(3);
  Tensor y = random_resized_crop(6, {1.0, 1.0}, {2.0, 2.0})(sq, g);
  EXPECT_EQ(y.to_vector<float>(), resized_crop_image(sq, 2, 0, 5, 10, 6, 6).to_vector<float>());
  EXPECT_THROW(random_resized_crop(8, {0.5, 0.1}), Error);
}

TEST(DataTransforms, ComposeDrawsFromTheGenerator) {
  Transform t = compose({random_crop(4, 4, 2), random_horizontal_flip(), {}, normalize({0.5f}, {0.5f})});
  Tensor x = rand({1, 4, 4});
  Generator a(11), b(11), c(12);
  std::vector<float> ya = t(x, a).to_vector<float>();
  EXPECT_EQ(ya, t(x, b).to_vector<float>());
  EXPECT_GT(a.offset(), 0u);  // the generator moved on
  // A different seed gives a different crop or flip for at least one of a few draws.
  bool differs = false;
  for (int i = 0; i < 5; ++i) differs |= t(x, a).to_vector<float>() != t(x, c).to_vector<float>();
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace octet
