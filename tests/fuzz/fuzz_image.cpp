// Fuzzes the image-folder decoding path (signature check, header size limits, libjpeg-turbo's JPEG
// decoding through data/jpeg.cpp, stb_image's PNG decoder, the conversion to a [3,H,W] tensor and
// the short-side resize). libjpeg-turbo is Debian's build, not instrumented: the harness checks how
// octet drives it (errors, limits, buffers), while the library is fuzzed upstream (OSS-Fuzz).
#include <filesystem>

#include "core/error.h"
#include "core/generator.h"
#include "data/image_folder.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string root = octet::fuzz::scratch_dir() + "/images";
  static const std::string file = root + "/a/x.png";
  static std::shared_ptr<octet::Dataset> ds = [] {
    std::filesystem::create_directories(root + "/a");
    const uint8_t any[1] = {0};
    octet::fuzz::write_bytes(file, any, 1);  // listed now, decoded on every get()
    return octet::image_folder(root, {}, /*decode_size=*/16);
  }();
  octet::fuzz::write_bytes(file, data, size);
  try {
    octet::Generator g(0);
    (void)ds->get(0, g);
  } catch (const octet::Error&) {
  }
  return 0;
}
