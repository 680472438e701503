#include "data/dataset.h"

#include <array>

#include "data/memory_dataset.h"

namespace octet {

Dataset::~Dataset() = default;

std::vector<std::string> Dataset::class_names() const {
  std::vector<std::string> names;
  for (int64_t c = 0; c < num_classes(); ++c) names.push_back(std::to_string(c));
  return names;
}

MemoryDataset::MemoryDataset(std::vector<uint8_t> pixels, std::vector<uint8_t> labels, Shape image_shape,
                             std::vector<std::string> class_names, Transform transform)
    : pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      image_shape_(std::move(image_shape)),
      input_shape_(image_shape_),
      class_names_(std::move(class_names)),
      transform_(std::move(transform)) {
  OCTET_CHECK(image_shape_.size() == 3 && shape_numel(image_shape_) > 0,
              "MemoryDataset: expected a [C,H,W] image shape, got ", image_shape_);
  OCTET_CHECK(pixels_.size() == labels_.size() * static_cast<size_t>(shape_numel(image_shape_)),
              "MemoryDataset: expected ", labels_.size(), " images of ", image_shape_, ", got ", pixels_.size(),
              " bytes");
  for (size_t i = 0; i < labels_.size(); ++i)
    OCTET_CHECK(labels_[i] < class_names_.size(), "MemoryDataset: label ", int{labels_[i]}, " of example ", i,
                " is out of range [0, ", class_names_.size(), ")");
  if (transform_ && !labels_.empty()) {
    Generator g(0);
    input_shape_ = get(0, g).input.shape();
  }
}

Example MemoryDataset::get(int64_t index, Generator& rng) const {
  OCTET_CHECK(index >= 0 && index < size(), "dataset: index ", index, " out of range [0, ", size(), ")");
  int64_t n = shape_numel(image_shape_);
  Tensor img = empty(image_shape_);
  float* dst = img.data<float>();
  const uint8_t* src = pixels_.data() + index * n;
  // x / 255 exactly as torchvision's ToTensor divides (a multiply by 1/255 rounds differently).
  static const std::array<float, 256> kScale = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[static_cast<size_t>(v)] = static_cast<float>(v) / 255.0f;
    return t;
  }();
  for (int64_t i = 0; i < n; ++i) dst[i] = kScale[src[i]];
  Example e{img, labels_[static_cast<size_t>(index)]};
  if (transform_) e.input = transform_(e.input, rng);
  return e;
}

}  // namespace octet
