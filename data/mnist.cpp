#include "data/mnist.h"

#include <string_view>

#include "core/error.h"
#include "data/file_io.h"
#include "data/memory_dataset.h"

namespace octet {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // u8, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // u8, 1 dimension
constexpr int64_t kClasses = 10;

std::string hex32(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s += digits[(v >> shift) & 0xf];
  return s;
}

// The most data bytes an IDX file may claim (about 1 TB): beyond any real data set, and small
// enough that the checks below never overflow.
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 40;

// Reads an IDX u8 file with `ndims` dimensions; returns the dimensions, `bytes` keeps the payload.
// The header is read and checked first, so the size it claims bounds what is read (or gunzipped).
Shape read_idx(const std::string& path, uint32_t magic, std::vector<uint8_t>& bytes) {
  size_t ndims = magic & 0xff;
  size_t header = 4 + 4 * ndims;
  std::vector<uint8_t> head = read_head_maybe_gz("mnist", path, header);
  OCTET_CHECK(head.size() >= 4, "mnist: ", path, ": file too short (", head.size(), " bytes) for an IDX header");
  uint32_t got = read_be32(head.data());
  OCTET_CHECK(got == magic, "mnist: ", path, ": expected magic ", hex32(magic), ", got ", hex32(got),
              (got == kImagesMagic || got == kLabelsMagic ? " (images and labels swapped?)" : ""));
  OCTET_CHECK(head.size() >= header, "mnist: ", path, ": file too short (", head.size(),
              " bytes) for an IDX header of ", header, " bytes");
  Shape dims;
  uint64_t count = 1;
  for (size_t d = 0; d < ndims; ++d) {
    dims.push_back(read_be32(head.data() + 4 + 4 * d));
    count *= static_cast<uint64_t>(dims.back());  // each factor < 2^32, and count <= 2^40 before it: no overflow
    OCTET_CHECK(count <= kMaxIdxBytes, "mnist: ", path, ": dimensions ", dims, " claim more than ", kMaxIdxBytes,
                " bytes of data");
  }
  bytes = read_file_maybe_gz("mnist", path, header + count);
  OCTET_CHECK(bytes.size() - header == count, "mnist: ", path, ": dimensions ", dims, " need ", count,
              " bytes of data after the header, got ", bytes.size() - header, " (truncated or corrupt file)");
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header));
  return dims;
}

std::shared_ptr<Dataset> load_idx_pair(const std::string& images_path, const std::string& labels_path, Transform t,
                                       std::vector<std::string> names) {
  std::vector<uint8_t> pixels, labels;
  Shape idims = read_idx(images_path, kImagesMagic, pixels);
  Shape ldims = read_idx(labels_path, kLabelsMagic, labels);
  OCTET_CHECK(idims[1] > 0 && idims[2] > 0, "mnist: ", images_path, ": expected non-empty images, got dimensions ",
              idims);
  OCTET_CHECK(idims[0] == ldims[0], "mnist: ", images_path, " holds ", idims[0], " images but ", labels_path, " holds ",
              ldims[0], " labels");
  for (size_t i = 0; i < labels.size(); ++i)
    OCTET_CHECK(labels[i] < kClasses, "mnist: ", labels_path, ": label ", int{labels[i]}, " of example ", i,
                " is out of range [0, ", kClasses, ")");
  return std::make_shared<MemoryDataset>(std::move(pixels), std::move(labels), Shape{1, idims[1], idims[2]},
                                         std::move(names), std::move(t));
}

// root/name or root/name.gz, whichever exists.
std::string find_idx(const std::string& who, const std::string& root, const std::string& name) {
  std::string base = root + "/" + name;
  if (file_exists(base)) return base;
  if (file_exists(base + ".gz")) return base + ".gz";
  OCTET_FAIL(who, ": missing ", base, "(.gz) in ", root, "; expected the four IDX files ",
             "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] there",
             (who == "fashion_mnist" ? " (Debian: apt install dataset-fashion-mnist, which fills "
                                       "/usr/share/datasets/fashion-mnist)"
                                     : ""));
}

std::shared_ptr<Dataset> load_root(const std::string& who, const std::string& root, bool train, Transform t,
                                   std::vector<std::string> names) {
  std::string prefix = train ? "train" : "t10k";
  std::string images = find_idx(who, root, prefix + "-images-idx3-ubyte");
  std::string labels = find_idx(who, root, prefix + "-labels-idx1-ubyte");
  return load_idx_pair(images, labels, std::move(t), std::move(names));
}

std::vector<std::string> digit_names() {
  std::vector<std::string> names;
  for (int c = 0; c < kClasses; ++c) names.push_back(std::to_string(c));
  return names;
}

}  // namespace

std::vector<std::string> fashion_mnist_class_names() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
}

std::shared_ptr<Dataset> mnist_idx(const std::string& images_path, const std::string& labels_path, Transform t) {
  return load_idx_pair(images_path, labels_path, std::move(t), digit_names());
}

std::shared_ptr<Dataset> fashion_mnist(const std::string& root, bool train, Transform t) {
  return load_root("fashion_mnist", root, train, std::move(t), fashion_mnist_class_names());
}

std::shared_ptr<Dataset> mnist(const std::string& root, bool train, Transform t) {
  return load_root("mnist", root, train, std::move(t), digit_names());
}

void write_idx(const std::string& path, const std::vector<uint8_t>& data, const Shape& dims) {
  OCTET_CHECK(!dims.empty() && dims.size() < 256, "write_idx: ", path, ": expected 1 to 255 dimensions, got ", dims);
  OCTET_CHECK(shape_numel(dims) == static_cast<int64_t>(data.size()), "write_idx: ", path, ": dimensions ", dims,
              " need ", shape_numel(dims), " values, got ", data.size());
  std::vector<uint8_t> bytes = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (int64_t d : dims) {
    OCTET_CHECK(d >= 0 && d <= 0xffffffffLL, "write_idx: ", path, ": dimension ", d, " does not fit in 32 bits");
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(d >> shift));
  }
  bytes.insert(bytes.end(), data.begin(), data.end());
  bool gz = std::string_view(path).ends_with(".gz");
  write_file("write_idx", path, bytes, gz);
}

}  // namespace octet
