#include "data/image_folder.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string_view>

#include "core/error.h"
#include "data/file_io.h"
#include "data/jpeg.h"

namespace octet {
namespace fs = std::filesystem;
namespace {

std::string lower_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

bool is_image(const fs::path& p) {
  std::string ext = lower_extension(p);
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

struct StbiFree {
  void operator()(stbi_uc* p) const { stbi_image_free(p); }
};

// Bounds on what an image file may claim, checked on its header before the decoder allocates
// anything: 16384 pixels a side and 2^26 pixels in all (a 768 MB f32 tensor) are beyond any
// training image.
constexpr int kMaxImageSide = 1 << 14;
constexpr int64_t kMaxImagePixels = int64_t{1} << 26;
// A JPEG decoder (libjpeg's for progressive files, as stb's did for all) allocates its whole frame
// from the header before reading any scan, so a 23-byte file claiming 1280x12023 pixels cost
// hundreds of MB (tests/fuzz/fuzz_image). Real JPEGs cannot claim much more than their bytes hold:
// an image of one flat colour, the most compressible there is, still spends about 4 bytes per
// 16x16 block of 4:2:0 (64 pixels a byte). So a JPEG may claim at most 2^20 pixels (any small
// image) plus 1024 per file byte, 16 times that extreme.
constexpr int64_t kJpegFreePixels = int64_t{1} << 20;
constexpr int64_t kJpegPixelsPerByte = 1024;

// Two faults of stb_image's PNG decoder that tests/fuzz/fuzz_image found, refused here:
// - it copies a zero-length IDAT chunk that comes before any image data to its still-null buffer
//   (memcpy(NULL, p, 0): undefined behaviour that lets the compiler drop stb's later "no IDAT"
//   null check); encoders never write such a chunk;
// - it allocates the length an IDAT chunk declares (up to 1 GiB, doubled to 2) before reading it:
//   every chunk must lie inside the file.
void check_png_chunks(const std::vector<uint8_t>& b, const std::string& path) {
  size_t at = 8;  // after the signature
  bool data_seen = false;
  while (at + 8 <= b.size()) {
    const size_t len = (size_t{b[at]} << 24) | (size_t{b[at + 1]} << 16) | (size_t{b[at + 2]} << 8) | b[at + 3];
    const std::string_view type(reinterpret_cast<const char*>(b.data() + at + 4), 4);
    if (type == "IEND") return;
    OCTET_CHECK(len <= b.size() - at - 8, "image_folder: cannot decode ", path, ": a PNG ", type, " chunk of ", len,
                " bytes runs past the end of the file (truncated or corrupt)");
    if (type == "IDAT") {
      OCTET_CHECK(len > 0 || data_seen, "image_folder: cannot decode ", path,
                  ": an empty PNG IDAT chunk before the image data (corrupt file)");
      data_seen = true;
    }
    at += 12 + len;  // length, type, data, CRC
  }
}

// A PNG through stb_image, to 8-bit RGB (grayscale, palette and alpha dropped or expanded).
Rgb8Image decode_png(const std::vector<uint8_t>& bytes, const std::string& path,
                     const std::function<void(int64_t, int64_t)>& check_size) {
  check_png_chunks(bytes, path);
  int w = 0, h = 0, channels_in_file = 0;
  if (!stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &channels_in_file))
    OCTET_FAIL("image_folder: cannot decode ", path, ": ", stbi_failure_reason(), " (corrupt PNG)");
  check_size(h, w);
  std::unique_ptr<stbi_uc, StbiFree> px(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &channels_in_file, 3));
  if (!px) OCTET_FAIL("image_folder: cannot decode ", path, ": ", stbi_failure_reason(), " (corrupt PNG)");
  OCTET_CHECK(w > 0 && h > 0, "image_folder: ", path, ": decoded an empty ", h, "x", w, " image");
  Rgb8Image im{h, w, {}};
  im.pixels.assign(px.get(), px.get() + static_cast<size_t>(h) * static_cast<size_t>(w) * 3);
  return im;
}

// Decodes one file to f32 [3,H,W] in [0,1]: a JPEG with libjpeg-turbo (data/jpeg.h), a PNG with
// stb_image.
Tensor decode_rgb(const std::string& path) {
  std::vector<uint8_t> bytes = read_file("image_folder", path, INT32_MAX);
  // stb_image also decodes GIF, PSD, HDR, PIC and PNM; only the two formats the folder holds are read.
  static const uint8_t kJpeg[] = {0xff, 0xd8, 0xff}, kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto starts_with = [&](const auto& magic) {
    return bytes.size() >= sizeof(magic) && std::equal(std::begin(magic), std::end(magic), bytes.begin());
  };
  const bool jpeg = starts_with(kJpeg);
  OCTET_CHECK(jpeg || starts_with(kPng), "image_folder: cannot decode ", path,
              ": not a JPEG or PNG file (its first bytes are neither format's signature)");
  auto check_size = [&](int64_t h, int64_t w) {
    OCTET_CHECK(w > 0 && h > 0 && w <= kMaxImageSide && h <= kMaxImageSide && w * h <= kMaxImagePixels,
                "image_folder: ", path, ": its header claims a ", h, "x", w, " image; expected 1 to ", kMaxImageSide,
                " pixels a side and at most ", kMaxImagePixels, " pixels");
    if (!jpeg) return;
    const int64_t most = kJpegFreePixels + kJpegPixelsPerByte * static_cast<int64_t>(bytes.size());
    OCTET_CHECK(w * h <= most, "image_folder: ", path, ": its header claims a ", h, "x", w,
                " image, more than a JPEG of ", bytes.size(), " bytes can hold (at most ", most,
                " pixels); truncated or corrupt file");
  };
  const Rgb8Image im = jpeg ? decode_jpeg(bytes, path, check_size) : decode_png(bytes, path, check_size);
  Tensor img = empty({3, im.height, im.width});
  float* dst = img.data<float>();
  const int64_t plane = im.height * im.width;
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c) dst[c * plane + i] = static_cast<float>(im.pixels[i * 3 + c]) / 255.0f;
  return img;
}

class ImageFolder : public Dataset {
 public:
  ImageFolder(std::vector<std::string> classes, std::vector<std::string> files, std::vector<int64_t> labels,
              Transform t, int64_t decode_size)
      : classes_(std::move(classes)),
        files_(std::move(files)),
        labels_(std::move(labels)),
        transform_(std::move(t)),
        decode_size_(decode_size) {}

  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  std::vector<std::string> class_names() const override { return classes_; }

  Example get(int64_t index, Generator& rng) const override {
    OCTET_CHECK(index >= 0 && index < size(), "image_folder: index ", index, " out of range [0, ", size(), ")");
    const std::string& path = files_[static_cast<size_t>(index)];
    Tensor img = decode_rgb(path);
    if (decode_size_ > 0) {
      auto [h, w] = short_side_size(img.size(1), img.size(2), decode_size_);
      if (h != img.size(1) || w != img.size(2)) img = resize_image(img, h, w);
    }
    if (transform_) img = transform_(img, rng);
    return {img, labels_[static_cast<size_t>(index)]};
  }

  Shape input_shape() const override {
    std::call_once(shape_once_, [this] {
      Generator g(0);
      input_shape_ = get(0, g).input.shape();
    });
    return input_shape_;
  }

 private:
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
  Transform transform_;
  int64_t decode_size_;
  mutable std::once_flag shape_once_;
  mutable Shape input_shape_;
};

}  // namespace

std::shared_ptr<Dataset> image_folder(const std::string& root, Transform t, int64_t decode_size) {
  OCTET_CHECK(decode_size >= 0, "image_folder: expected decode_size >= 0, got ", decode_size);
  std::error_code ec;
  OCTET_CHECK(fs::is_directory(root, ec), "image_folder: ", root,
              ": not a directory; expected one subfolder per class holding .jpg/.jpeg/.png images");
  std::vector<std::string> classes;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (std::error_code dec; it->is_directory(dec)) classes.push_back(it->path().filename().string());
  OCTET_CHECK(!ec, "image_folder: ", root, ": cannot list: ", ec.message());
  std::sort(classes.begin(), classes.end());
  OCTET_CHECK(!classes.empty(), "image_folder: ", root,
              ": no class subfolders; expected one subfolder per class holding .jpg/.jpeg/.png images");
  std::vector<std::string> files;
  std::vector<int64_t> labels;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::string dir = root + "/" + classes[c];
    std::vector<std::string> found;
    auto opts = fs::directory_options::follow_directory_symlink | fs::directory_options::skip_permission_denied;
    for (fs::recursive_directory_iterator it(dir, opts, ec), end; !ec && it != end; it.increment(ec))
      if (std::error_code fec; it->is_regular_file(fec) && is_image(it->path())) found.push_back(it->path().string());
    OCTET_CHECK(!ec, "image_folder: ", dir, ": cannot list: ", ec.message());
    OCTET_CHECK(!found.empty(), "image_folder: ", dir, ": class folder holds no .jpg/.jpeg/.png images");
    std::sort(found.begin(), found.end());
    for (std::string& f : found) {
      files.push_back(std::move(f));
      labels.push_back(static_cast<int64_t>(c));
    }
  }
  return std::make_shared<ImageFolder>(std::move(classes), std::move(files), std::move(labels), std::move(t),
                                       decode_size);
}

void write_image(const std::string& path, const std::vector<uint8_t>& pixels, int64_t h, int64_t w, int64_t channels) {
  OCTET_CHECK(h > 0 && w > 0 && h <= (1 << 16) && w <= (1 << 16), "write_image: ", path,
              ": expected a size in [1, 65536], got ", h, "x", w);
  OCTET_CHECK(channels >= 1 && channels <= 4, "write_image: ", path, ": expected 1 to 4 channels, got ", channels);
  OCTET_CHECK(static_cast<int64_t>(pixels.size()) == h * w * channels, "write_image: ", path, ": expected ",
              h * w * channels, " bytes for ", h, "x", w, "x", channels, ", got ", pixels.size());
  std::string ext = lower_extension(path);
  int ok = 0;
  if (ext == ".jpg" || ext == ".jpeg") {
    ok = stbi_write_jpg(path.c_str(), static_cast<int>(w), static_cast<int>(h), static_cast<int>(channels),
                        pixels.data(), 95);
  } else {
    ok = stbi_write_png(path.c_str(), static_cast<int>(w), static_cast<int>(h), static_cast<int>(channels),
                        pixels.data(), static_cast<int>(w * channels));
  }
  OCTET_CHECK(ok != 0, "write_image: ", path, ": cannot write the file");
}

}  // namespace octet
