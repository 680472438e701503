// CIFAR-10 from the "binary version" batches (cifar-10-binary.tar.gz): data_batch_1..5.bin for
// training and test_batch.bin for testing, each a sequence of 3073-byte records (one label byte,
// then 1024 red, 1024 green and 1024 blue pixels of a 32x32 image, row-major). Loaded into memory
// once as u8; inputs are f32 [3,32,32] in [0,1] before the transform.
//   auto train = cifar10("/data/cifar10", /*train=*/true, random_crop(32, 32, 4));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"

namespace octet {

// Looks for the batches in `root`, then in `root`/cifar-10-batches-bin.
std::shared_ptr<Dataset> cifar10(const std::string& root, bool train, Transform t = {});

std::vector<std::string> cifar10_class_names();

// Writes one batch file: `images` holds N records of 3072 bytes (planes R, G, B of 32x32),
// `labels` N values < 10.
void write_cifar10_batch(const std::string& path, const std::vector<uint8_t>& images,
                         const std::vector<uint8_t>& labels);

}  // namespace octet
