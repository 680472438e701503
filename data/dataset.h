// Datasets: indexed collections of (input, label) examples. Inputs are f32 [C,H,W] in [0,1]
// (before normalization), after the dataset's transform; labels are class ids in [0, num_classes).
//   auto ds = fashion_mnist("/usr/share/datasets/fashion-mnist", /*train=*/true);
//   Generator g(7);  Example e = ds->get(0, g);   // e.input [1,28,28], e.label in [0,10)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace octet {

struct Example {
  Tensor input;
  int64_t label = 0;
};

// get() is const and called from several loader threads at once: implementations keep no mutable
// state besides what they guard themselves. `rng` serves random augmentation only, so an example
// is a pure function of (index, rng's seed and offset).
class Dataset {
 public:
  virtual ~Dataset();
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index, Generator& rng) const = 0;
  // Shape of an input after the transform (for datasets of varying image sizes: of example 0).
  virtual Shape input_shape() const = 0;
  virtual int64_t num_classes() const = 0;
  // Names of the classes, indexed by label; "0", "1", ... where the data has none.
  virtual std::vector<std::string> class_names() const;
};

}  // namespace octet
