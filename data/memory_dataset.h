// An in-memory dataset of u8 images [N, C, H, W] and labels, shared by the MNIST and CIFAR loaders:
// each get() converts one image to f32 in [0,1] and applies the transform.
//   auto ds = std::make_shared<MemoryDataset>(std::move(pixels), std::move(labels), Shape{3, 32, 32},
//                                             cifar10_class_names(), transform);
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"

namespace octet {

class MemoryDataset : public Dataset {
 public:
  // pixels.size() == labels.size() * numel(image_shape); labels < class_names.size().
  MemoryDataset(std::vector<uint8_t> pixels, std::vector<uint8_t> labels, Shape image_shape,
                std::vector<std::string> class_names, Transform transform);
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Example get(int64_t index, Generator& rng) const override;
  Shape input_shape() const override { return input_shape_; }
  int64_t num_classes() const override { return static_cast<int64_t>(class_names_.size()); }
  std::vector<std::string> class_names() const override { return class_names_; }

 private:
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> labels_;
  Shape image_shape_;
  Shape input_shape_;
  std::vector<std::string> class_names_;
  Transform transform_;
};

}  // namespace octet
