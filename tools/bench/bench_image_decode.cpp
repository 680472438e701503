// JPEG decoding, one thread: libjpeg-turbo through data/jpeg.h (what image folders use) against
// stb_image (what they used before), on generated photos of ImageNet's typical size (500x375) and
// of CIFAR/ImageNet-crop size (224x224), at 4:2:0 quality 85 and 4:4:4 quality 95.
//   build/tools/bench/octet_bench_image_decode
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <tuple>
#include <vector>

#include "bench_util.h"
#include "core/generator.h"
#include "data/jpeg.h"

namespace {

// A smooth gradient with noise: compresses like a photo (about 1 to 3 bits a pixel).
std::vector<uint8_t> photo_jpeg(int h, int w, int quality) {
  std::vector<uint8_t> rgb(static_cast<size_t>(h) * w * 3);
  uint64_t s = 12345;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        const double noise = static_cast<double>((s >> 33) % 41) - 20.0;
        const double v = 128 + 90 * std::sin(0.02 * (x + 2 * c) + 0.03 * y) + noise;
        rgb[(static_cast<size_t>(y) * w + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
  std::vector<uint8_t> out;
  stbi_write_jpg_to_func(
      [](void* ctx, void* data, int size) {
        auto* o = static_cast<std::vector<uint8_t>*>(ctx);
        o->insert(o->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
      },
      &out, w, h, 3, rgb.data(), quality);
  return out;
}

}  // namespace

int main() {
  std::printf("| image | file bytes | libjpeg-turbo ms | stb_image ms | stb / libjpeg-turbo |\n|---|---|---|---|---|\n");
  // stb_image_write writes 4:2:0 below quality 90 and 4:4:4 from 90 up.
  for (auto [h, w, q] : {std::tuple{375, 500, 85}, std::tuple{375, 500, 95}, std::tuple{224, 224, 85}}) {
    const std::vector<uint8_t> file = photo_jpeg(h, w, q);
    const double turbo = octet::bench::best_time(30, [&] {
      octet::Rgb8Image im = octet::decode_jpeg(file, "bench", [](int64_t, int64_t) {});
      if (im.pixels.empty()) std::abort();
    });
    const double stb = octet::bench::best_time(30, [&] {
      int ww = 0, hh = 0, c = 0;
      std::unique_ptr<stbi_uc, void (*)(void*)> px(
          stbi_load_from_memory(file.data(), static_cast<int>(file.size()), &ww, &hh, &c, 3), stbi_image_free);
      if (!px) std::abort();
    });
    std::printf("| %dx%d, %s q%d | %zu | %.3f | %.3f | %.2f |\n", w, h, q < 90 ? "4:2:0" : "4:4:4", q, file.size(),
                turbo * 1e3, stb * 1e3, stb / turbo);
  }
  return 0;
}
