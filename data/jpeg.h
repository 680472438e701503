// JPEG decoding with libjpeg-turbo, the decoder behind PIL and so behind torchvision's ImageFolder,
// with PIL's settings (accurate integer IDCT, fancy upsampling): an image decodes to the same
// pixels as it does there with the same library version. Grayscale, RGB, YCbCr, CMYK and YCCK files
// all become 8-bit RGB.
//   Rgb8Image im = decode_jpeg(bytes, "photo.jpg", [](int64_t h, int64_t w) { /* throw if too big */ });
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace octet {

struct Rgb8Image {
  int64_t height = 0, width = 0;
  std::vector<uint8_t> pixels;  // [height, width, 3]
};

// `check_size(height, width)` sees the size the header claims before the frame is allocated and
// throws to refuse it. A corrupt file is an octet::Error naming `path` and libjpeg's reason, and so
// is a truncated one (as PIL refuses it); a file whose data libjpeg can still decode with a warning
// (a stray byte before a marker) decodes, as in PIL. At most kMaxJpegScans scans are decoded: a
// progressive file of thousands of tiny scans would otherwise take minutes.
constexpr int kMaxJpegScans = 500;
Rgb8Image decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& path,
                      const std::function<void(int64_t, int64_t)>& check_size);

}  // namespace octet
