// MNIST-family datasets in IDX format (plain or gzip-compressed, detected by magic bytes), loaded
// into memory once as u8. Inputs are f32 [1,28,28] in [0,1] before the transform.
//   auto train = fashion_mnist("/usr/share/datasets/fashion-mnist", /*train=*/true);
//   auto test = mnist_idx("/data/t10k-images-idx3-ubyte.gz", "/data/t10k-labels-idx1-ubyte.gz");
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"

namespace octet {

// Images: IDX u8 [N, rows, cols] (magic 0x00000803); labels: IDX u8 [N] (magic 0x00000801), < 10.
std::shared_ptr<Dataset> mnist_idx(const std::string& images_path, const std::string& labels_path, Transform t = {});
// Finds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in `root` (the Debian package
// dataset-fashion-mnist installs them in /usr/share/datasets/fashion-mnist).
std::shared_ptr<Dataset> fashion_mnist(const std::string& root, bool train, Transform t = {});
// The same layout for the original digits.
std::shared_ptr<Dataset> mnist(const std::string& root, bool train, Transform t = {});

std::vector<std::string> fashion_mnist_class_names();

// Writes an IDX file of u8 values with the given dimensions (gzip-compressed when the path ends
// in ".gz"): dims {N, 28, 28} for images, {N} for labels.
void write_idx(const std::string& path, const std::vector<uint8_t>& data, const Shape& dims);

}  // namespace octet
