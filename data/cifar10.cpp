#include "data/cifar10.h"

#include "core/error.h"
#include "data/file_io.h"
#include "data/memory_dataset.h"

namespace octet {
namespace {

constexpr size_t kImageBytes = 3 * 32 * 32;
constexpr size_t kRecordBytes = 1 + kImageBytes;
constexpr uint8_t kClasses = 10;
// A real batch file holds 10000 records (30.7 MB); a much larger file is refused before it is read.
constexpr uint64_t kMaxBatchBytes = uint64_t{1} << 31;

std::string missing_message(const std::string& root, const std::string& path) {
  return detail::str_cat("cifar10: missing ", path,
                         "; download cifar-10-binary.tar.gz (https://www.cs.toronto.edu/~kriz/cifar.html) and extract "
                         "cifar-10-batches-bin into ",
                         root, " so that ", root,
                         " (or its cifar-10-batches-bin folder) holds data_batch_1.bin .. data_batch_5.bin and "
                         "test_batch.bin; each file is a sequence of 3073-byte records: 1 label byte (0-9), then "
                         "the 32x32 R, G and B planes");
}

// Appends the records of one batch file.
void read_batch(const std::string& path, std::vector<uint8_t>& pixels, std::vector<uint8_t>& labels) {
  std::vector<uint8_t> bytes = read_file("cifar10", path, kMaxBatchBytes);
  OCTET_CHECK(!bytes.empty() && bytes.size() % kRecordBytes == 0, "cifar10: ", path,
              ": expected a non-empty multiple of ", kRecordBytes,
              " bytes (records of 1 label byte + 3072 pixel bytes), got ", bytes.size(),
              " bytes (truncated or not a CIFAR-10 binary batch?)");
  size_t n = bytes.size() / kRecordBytes;
  pixels.reserve(pixels.size() + n * kImageBytes);
  for (size_t r = 0; r < n; ++r) {
    const uint8_t* rec = bytes.data() + r * kRecordBytes;
    OCTET_CHECK(rec[0] < kClasses, "cifar10: ", path, ": record ", r, " has label ", int{rec[0]},
                ", expected 0..9 (a CIFAR-100 file? those have two label bytes)");
    labels.push_back(rec[0]);
    pixels.insert(pixels.end(), rec + 1, rec + kRecordBytes);
  }
}

}  // namespace

std::vector<std::string> cifar10_class_names() {
  return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
}

std::shared_ptr<Dataset> cifar10(const std::string& root, bool train, Transform t) {
  std::vector<std::string> names;
  if (train) {
    for (int b = 1; b <= 5; ++b) names.push_back("data_batch_" + std::to_string(b) + ".bin");
  } else {
    names.push_back("test_batch.bin");
  }
  std::string dir = root;
  if (!file_exists(dir + "/" + names[0]) && file_exists(root + "/cifar-10-batches-bin/" + names[0]))
    dir = root + "/cifar-10-batches-bin";
  for (const std::string& name : names)
    if (!file_exists(dir + "/" + name)) OCTET_FAIL(missing_message(root, dir + "/" + name));
  std::vector<uint8_t> pixels, labels;
  for (const std::string& name : names) read_batch(dir + "/" + name, pixels, labels);
  return std::make_shared<MemoryDataset>(std::move(pixels), std::move(labels), Shape{3, 32, 32}, cifar10_class_names(),
                                         std::move(t));
}

void write_cifar10_batch(const std::string& path, const std::vector<uint8_t>& images,
                         const std::vector<uint8_t>& labels) {
  OCTET_CHECK(images.size() == labels.size() * kImageBytes, "write_cifar10_batch: ", path, ": expected ", labels.size(),
              " images of 3072 bytes, got ", images.size(), " bytes");
  std::vector<uint8_t> bytes;
  bytes.reserve(labels.size() * kRecordBytes);
  for (size_t i = 0; i < labels.size(); ++i) {
    OCTET_CHECK(labels[i] < kClasses, "write_cifar10_batch: ", path, ": label ", int{labels[i]}, " of image ", i,
                " is out of range [0, 10)");
    bytes.push_back(labels[i]);
    bytes.insert(bytes.end(), images.begin() + static_cast<std::ptrdiff_t>(i * kImageBytes),
                 images.begin() + static_cast<std::ptrdiff_t>((i + 1) * kImageBytes));
  }
  write_file("write_cifar10_batch", path, bytes);
}

}  // namespace octet
