// A folder of images with one subfolder per class (torchvision ImageFolder): class ids follow the
// sorted subfolder names, images are found recursively (.jpg, .jpeg, .png, any case) and decoded
// lazily in get() (JPEG with libjpeg-turbo as PIL does, PNG with stb_image); grayscale, CMYK and
// RGBA become RGB. Inputs are f32 [3,H,W] in [0,1].
//   auto train = image_folder("/data/imagenette/train", compose({random_resized_crop(224),
//                                                                random_horizontal_flip()}), 256);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"

namespace octet {

// decode_size > 0 resizes every decoded image (bilinear) so its shorter side has that length,
// before the transform. input_shape() decodes example 0 once.
std::shared_ptr<Dataset> image_folder(const std::string& root, Transform t = {}, int64_t decode_size = 0);

// Writes `pixels` (h x w x channels interleaved u8, channels 1..4) as PNG, or as JPEG (quality 95)
// when the path ends in .jpg/.jpeg; for tests and small fixtures.
void write_image(const std::string& path, const std::vector<uint8_t>& pixels, int64_t h, int64_t w, int64_t channels);

}  // namespace octet
