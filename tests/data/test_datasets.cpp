// Dataset loaders on small generated files: labels and pixels come back as written, and every
// kind of bad file (missing, truncated, wrong magic, wrong counts, corrupt) is an octet::Error
// that names the path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/octet.h"
#include "data/data.h"
#include "data/file_io.h"
#include "data/jpeg.h"
#include "temp_dir.h"

namespace octet {
namespace {

using testing::TempDir;

// JPEG of a flat color at quality 95 decodes within a couple of levels of the original.
constexpr float kJpegTol = 3.0f / 255.0f;

// Runs `fn`, expecting an octet::Error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an octet::Error";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

std::vector<uint8_t> iota_bytes(size_t n, int step = 1) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * static_cast<size_t>(step));
  return v;
}

void truncate_file(const std::string& path, size_t drop) {
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - drop);
}

TEST(DataMnist, IdxPlainAndGzip) {
  TempDir dir;
  std::vector<uint8_t> pixels = iota_bytes(5 * 3 * 4, 3), labels = {7, 0, 9, 3, 3};
  for (std::string ext : {"", ".gz"}) {
    std::string images = dir.path() + "/img" + ext, lab = dir.path() + "/lab" + ext;
    write_idx(images, pixels, {5, 3, 4});
    write_idx(lab, labels, {5});
    auto ds = mnist_idx(images, lab);
    ASSERT_EQ(ds->size(), 5);
    EXPECT_EQ(ds->input_shape(), (Shape{1, 3, 4}));
    EXPECT_EQ(ds->num_classes(), 10);
    Generator g(0);
    Example e = ds->get(2, g);
    EXPECT_EQ(e.label, 9);
    std::vector<float> x = e.input.to_vector<float>();
    for (size_t i = 0; i < 12; ++i) EXPECT_EQ(x[i], static_cast<float>(pixels[24 + i]) / 255.0f);
    EXPECT_THROW(ds->get(5, g), Error);
  }
  // gzip is detected by its magic bytes, not by the name.
  std::filesystem::rename(dir.path() + "/img.gz", dir.path() + "/img_gz");
  EXPECT_EQ(mnist_idx(dir.path() + "/img_gz", dir.path() + "/lab")->size(), 5);
}

TEST(DataMnist, FashionMnistRootAndTransform) {
  TempDir dir;
  write_idx(dir.path() + "/t10k-images-idx3-ubyte.gz", iota_bytes(2 * 28 * 28), {2, 28, 28});
  write_idx(dir.path() + "/t10k-labels-idx1-ubyte", {4, 1}, {2});
  auto ds = fashion_mnist(dir.path(), false, center_crop(20, 20));
  EXPECT_EQ(ds->size(), 2);
  EXPECT_EQ(ds->input_shape(), (Shape{1, 20, 20}));
  EXPECT_EQ(ds->class_names()[4], "Coat");
  expect_error([&] { fashion_mnist(dir.path(), true); }, {dir.path() + "/train-images-idx3-ubyte", "missing"});
}

TEST(DataMnist, BadFiles) {
  TempDir dir;
  std::string images = dir.path() + "/img", labels = dir.path() + "/lab";
  write_idx(images, iota_bytes(4 * 2 * 2), {4, 2, 2});
  write_idx(labels, {1, 2, 3, 4}, {4});
  EXPECT_EQ(mnist_idx(images, labels)->size(), 4);
  expect_error([&] { mnist_idx(labels, images); }, {labels, "expected magic 0x00000803, got 0x00000801"});
  expect_error([&] { mnist_idx(dir.path() + "/nope", labels); }, {dir.path() + "/nope", "not found"});
  // Counts that disagree.
  write_idx(dir.path() + "/lab3", {1, 2, 3}, {3});
  expect_error([&] { mnist_idx(images, dir.path() + "/lab3"); }, {"4 images", "3 labels"});
  // A label out of range.
  write_idx(dir.path() + "/lab_bad", {1, 2, 12, 4}, {4});
  expect_error([&] { mnist_idx(images, dir.path() + "/lab_bad"); }, {dir.path() + "/lab_bad", "label 12"});
  // Truncated payload, truncated header, empty file.
  truncate_file(images, 1);
  expect_error([&] { mnist_idx(images, labels); }, {images, "truncated"});
  truncate_file(images, 20);  // 11 bytes: a magic but no room for the dimensions
  expect_error([&] { mnist_idx(images, labels); }, {images, "too short"});
  truncate_file(images, std::filesystem::file_size(images));
  expect_error([&] { mnist_idx(images, labels); }, {images});
  // A truncated gzip stream.
  std::string gz = dir.path() + "/img.gz";
  write_idx(gz, iota_bytes(64 * 28 * 28, 7), {64, 28, 28});
  truncate_file(gz, std::filesystem::file_size(gz) / 2);
  expect_error([&] { mnist_idx(gz, labels); }, {gz, "gzip"});
  // A directory where a file should be.
  expect_error([&] { mnist_idx(dir.path(), labels); }, {dir.path(), "not a regular file"});
}

TEST(DataMnist, FashionMnistInstalled) {
  const std::string root = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::is_directory(root)) GTEST_SKIP() << root << " not installed (dataset-fashion-mnist)";
  auto train = fashion_mnist(root, true), test = fashion_mnist(root, false);
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(test->size(), 10000);
  EXPECT_EQ(train->input_shape(), (Shape{1, 28, 28}));
  Generator g(0);
  Example e = test->get(9999, g);
  EXPECT_GE(e.label, 0);
  EXPECT_LT(e.label, 10);
  float mx = 0;
  for (float v : e.input.to_vector<float>()) mx = std::max(mx, v);
  EXPECT_GT(mx, 0.0f);
  EXPECT_LE(mx, 1.0f);
}

TEST(DataCifar10, LoadsBatches) {
  TempDir dir;
  std::string bin = dir.path() + "/cifar-10-batches-bin";
  std::filesystem::create_directories(bin);
  std::vector<uint8_t> all_labels;
  for (int b = 1; b <= 5; ++b) {
    size_t n = b == 5 ? 3 : 1;
    std::vector<uint8_t> labels;
    for (size_t i = 0; i < n; ++i) labels.push_back(static_cast<uint8_t>((b + i) % 10));
    all_labels.insert(all_labels.end(), labels.begin(), labels.end());
    write_cifar10_batch(bin + "/data_batch_" + std::to_string(b) + ".bin", iota_bytes(n * 3072, b), labels);
  }
  write_cifar10_batch(bin + "/test_batch.bin", iota_bytes(2 * 3072), {9, 0});
  auto train = cifar10(dir.path(), true);  // found in the cifar-10-batches-bin subfolder
  ASSERT_EQ(train->size(), 7);
  EXPECT_EQ(train->input_shape(), (Shape{3, 32, 32}));
  EXPECT_EQ(train->class_names()[9], "truck");
  Generator g(0);
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(train->get(i, g).label, all_labels[static_cast<size_t>(i)]);
  // Record 1 of batch 5 (dataset index 5): bytes (3072 + k) * 5; channel-major planes.
  std::vector<float> x = train->get(5, g).input.to_vector<float>();
  for (size_t k : {size_t{0}, size_t{1023}, size_t{1024}, size_t{3071}})
    EXPECT_EQ(x[k], static_cast<float>(static_cast<uint8_t>((3072 + k) * 5)) / 255.0f) << k;
  auto test = cifar10(bin, false, random_crop(28, 28, 0));
  EXPECT_EQ(test->size(), 2);
  EXPECT_EQ(test->input_shape(), (Shape{3, 28, 28}));
  EXPECT_EQ(test->get(0, g).label, 9);
}

TEST(DataCifar10, BadFiles) {
  TempDir dir;
  expect_error([&] { cifar10(dir.path(), false); },
               {dir.path() + "/test_batch.bin", "cifar-10-binary.tar.gz", "3073-byte records"});
  std::string path = dir.path() + "/test_batch.bin";
  write_cifar10_batch(path, iota_bytes(2 * 3072), {1, 2});
  truncate_file(path, 100);
  expect_error([&] { cifar10(dir.path(), false); }, {path, "multiple of 3073", "6046"});
  std::vector<uint8_t> bytes(3073, 0);
  bytes[0] = 10;
  write_file("test", path, bytes);
  expect_error([&] { cifar10(dir.path(), false); }, {path, "label 10"});
  write_file("test", path, {});
  expect_error([&] { cifar10(dir.path(), false); }, {path});
  EXPECT_THROW(write_cifar10_batch(path, iota_bytes(3072), {10}), Error);
  EXPECT_THROW(write_cifar10_batch(path, iota_bytes(3000), {1}), Error);
}

// root/cat/a.png (RGB), root/cat/sub/b.png (gray), root/dog/c.png (RGBA), root/dog/d.jpg; notes
// are ignored.
void make_image_folder(const std::string& root) {
  std::filesystem::create_directories(root + "/cat/sub");
  std::filesystem::create_directories(root + "/dog");
  write_image(root + "/cat/a.png", iota_bytes(2 * 3 * 3, 10), 2, 3, 3);
  write_image(root + "/cat/sub/b.png", {10, 20, 30, 40}, 2, 2, 1);
  write_image(root + "/dog/c.png", {1, 2, 3, 255, 4, 5, 6, 0}, 1, 2, 4);
  write_image(root + "/dog/d.jpg", std::vector<uint8_t>(8 * 12 * 3, 200), 8, 12, 3);
  std::ofstream(root + "/dog/notes.txt") << "not an image";
}

TEST(DataImageFolder, DecodesClassesAndPixels) {
  TempDir dir;
  make_image_folder(dir.path());
  auto ds = image_folder(dir.path());
  ASSERT_EQ(ds->size(), 4);
  EXPECT_EQ(ds->class_names(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(ds->num_classes(), 2);
  EXPECT_EQ(ds->input_shape(), (Shape{3, 2, 3}));
  Generator g(0);
  Example a = ds->get(0, g);
  EXPECT_EQ(a.label, 0);
  std::vector<float> x = a.input.to_vector<float>();  // [3,2,3] from interleaved HWC
  for (size_t c = 0; c < 3; ++c)
    for (size_t p = 0; p < 6; ++p) EXPECT_EQ(x[c * 6 + p], static_cast<float>((p * 3 + c) * 10) / 255.0f);
  Example b = ds->get(1, g);  // grayscale -> three equal channels
  EXPECT_EQ(b.label, 0);
  EXPECT_EQ(b.input.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(b.input.to_vector<float>()[8 + 3], 40.0f / 255.0f);
  Example c = ds->get(2, g);  // RGBA -> RGB, alpha dropped
  EXPECT_EQ(c.label, 1);
  EXPECT_EQ(c.input.to_vector<float>(),
            (std::vector<float>{1 / 255.f, 4 / 255.f, 2 / 255.f, 5 / 255.f, 3 / 255.f, 6 / 255.f}));
  Example d = ds->get(3, g);
  EXPECT_EQ(d.input.shape(), (Shape{3, 8, 12}));
  for (float v : d.input.to_vector<float>()) ASSERT_NEAR(v, 200.0f / 255.0f, kJpegTol);
  // decode_size resizes the shorter side before the transform.
  auto small = image_folder(dir.path(), center_crop(4, 4), 4);
  EXPECT_EQ(small->get(3, g).input.shape(), (Shape{3, 4, 4}));
  EXPECT_EQ(image_folder(dir.path(), {}, 4)->get(3, g).input.shape(), (Shape{3, 4, 6}));
}

// Sizes a file claims are checked before anything that large is allocated or decompressed.
TEST(DataMnist, ClaimedSizesAreBoundedByTheFile) {
  TempDir dir;
  std::string labels = dir.path() + "/lab";
  write_idx(labels, {1}, {1});
  // An IDX header claiming 10^12 pixels (10^6 images of 1000x1000) on a 16-byte file.
  std::vector<uint8_t> head = {0, 0, 8, 3, 0, 0x0f, 0x42, 0x40, 0, 0, 0x03, 0xe8, 0, 0, 0x03, 0xe8};
  write_file("test", dir.path() + "/img", head);
  expect_error([&] { mnist_idx(dir.path() + "/img", labels); }, {dir.path() + "/img", "need 1000000000000 bytes"});
  // Beyond 2^40 bytes the header alone is refused.
  head[4] = 0xff;
  write_file("test", dir.path() + "/img", head);
  expect_error([&] { mnist_idx(dir.path() + "/img", labels); }, {dir.path() + "/img", "claim more than"});
  // A gzip bomb: 16 bytes of header claiming 1 image of 2x2, then 64 MiB of zeros that compress
  // to a few kilobytes. It is refused after 5 decompressed bytes, not after 64 MiB.
  std::vector<uint8_t> bomb = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2};
  bomb.resize(bomb.size() + (64 << 20));
  write_file("test", dir.path() + "/bomb.gz", bomb, /*gzip=*/true);
  EXPECT_LT(std::filesystem::file_size(dir.path() + "/bomb.gz"), 1u << 20);
  expect_error([&] { mnist_idx(dir.path() + "/bomb.gz", labels); }, {dir.path() + "/bomb.gz", "more than the 20 bytes"});
}

TEST(DataCifar10, OversizedFileIsRefusedUnread) {
  TempDir dir;
  std::string path = dir.path() + "/test_batch.bin";
  write_file("test", path, {});
  std::filesystem::resize_file(path, uint64_t{3073} << 20);  // sparse: 1M records, 3.2 GB
  expect_error([&] { cifar10(dir.path(), false); }, {path, "more than the"});
}

TEST(DataImageFolder, ClaimedSizesAreBoundedBeforeDecoding) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/a");
  write_image(dir.path() + "/a/x.png", {1, 2, 3}, 1, 1, 3);
  auto ds = image_folder(dir.path());
  Generator g(0);
  // The PNG's IHDR says 1x1; make it claim more. The size is read from the header first, so the
  // claim is refused before stb allocates the image: 10000x10000 is under stb's own limit of 2^30
  // bytes but over octet's 2^26 pixels; 1000000x1000000 (10^12 pixels) stb refuses itself.
  const std::vector<uint8_t> png = read_file("test", dir.path() + "/a/x.png");
  auto claim = [&](std::vector<uint8_t> side) {
    std::vector<uint8_t> bad = png;
    std::copy(side.begin(), side.end(), bad.begin() + 16);  // width
    std::copy(side.begin(), side.end(), bad.begin() + 20);  // height
    write_file("test", dir.path() + "/a/x.png", bad);
  };
  claim({0x00, 0x00, 0x27, 0x10});
  expect_error([&] { ds->get(0, g); }, {dir.path() + "/a/x.png", "10000x10000"});
  claim({0x00, 0x0f, 0x42, 0x40});
  expect_error([&] { ds->get(0, g); }, {dir.path() + "/a/x.png", "cannot decode"});
  // Formats stb_image decodes but an image folder does not hold (here a GIF) are refused unread.
  write_file("test", dir.path() + "/a/x.png", {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0});
  expect_error([&] { ds->get(0, g); }, {dir.path() + "/a/x.png", "not a JPEG or PNG"});
}

const std::string kJpegDir = std::string(OCTET_TESTS_DIR) + "/data/jpeg/";

// A folder with one class holding x.jpg with these bytes, and the dataset reading it.
std::shared_ptr<Dataset> one_jpeg(const TempDir& dir, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(dir.path() + "/a");
  write_file("test", dir.path() + "/a/x.jpg", bytes);
  return image_folder(dir.path());
}

// JPEGs written by PIL (4:2:0, 4:2:2, progressive 4:4:4, grayscale, Adobe CMYK, all 23x37 so the
// MCUs are partial) decode to exactly the bytes PIL decodes them to (tests/data/jpeg/make_goldens.py,
// Pillow 13 with libjpeg-turbo 3.2): torchvision's pipeline sees the same pixels.
TEST(DataImageFolder, JpegDecodesAsPil) {
  for (const char* name : {"rgb_420", "rgb_422", "rgb_444_progressive", "gray", "cmyk"}) {
    SCOPED_TRACE(name);
    TempDir dir;
    auto ds = one_jpeg(dir, read_file("test", kJpegDir + name + ".jpg"));
    Generator g(0);
    const Tensor x = ds->get(0, g).input;
    ASSERT_EQ(x.shape(), (Shape{3, 23, 37}));
    const std::vector<uint8_t> want = read_file("test", kJpegDir + name + ".rgb");
    const std::vector<float> got = x.to_vector<float>();
    const size_t plane = 23 * 37;
    int64_t differ = 0;
    for (size_t i = 0; i < plane; ++i)
      for (size_t c = 0; c < 3; ++c) differ += got[c * plane + i] != static_cast<float>(want[i * 3 + c]) / 255.0f;
    EXPECT_EQ(differ, 0);
  }
}

// A truncated JPEG is an error (as in PIL), as is one claiming more pixels than the bounds or its
// size allow, and one of more than kMaxJpegScans scans.
TEST(DataImageFolder, JpegHeaderBoundsTruncationAndScans) {
  const std::vector<uint8_t> good = read_file("test", kJpegDir + "rgb_420.jpg");
  Generator g(0);
  {
    TempDir dir;
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() * 2 / 3));
    expect_error([&] { one_jpeg(dir, cut)->get(0, g); }, {"x.jpg", "Premature end of JPEG file"});
  }
  // The frame header (SOF0): height at +5, width at +7.
  size_t sof = 2;
  while (!(good[sof] == 0xff && good[sof + 1] == 0xc0)) ++sof;
  auto claiming = [&](int h, int w) {
    std::vector<uint8_t> b = good;
    b[sof + 5] = static_cast<uint8_t>(h >> 8), b[sof + 6] = static_cast<uint8_t>(h);
    b[sof + 7] = static_cast<uint8_t>(w >> 8), b[sof + 8] = static_cast<uint8_t>(w);
    return b;
  };
  {
    TempDir dir;
    expect_error([&] { one_jpeg(dir, claiming(16000, 16000))->get(0, g); }, {"x.jpg", "claims a 16000x16000 image"});
  }
  {
    TempDir dir;
    expect_error([&] { one_jpeg(dir, claiming(2000, 2000))->get(0, g); },
                 {"x.jpg", "more than a JPEG of " + std::to_string(good.size()) + " bytes can hold"});
  }
  // The progressive file's last scan repeated: libjpeg warns of a bogus progression and would
  // decode every copy.
  const std::vector<uint8_t> prog = read_file("test", kJpegDir + "rgb_444_progressive.jpg");
  size_t last_sos = prog.size() - 2;
  while (!(prog[last_sos] == 0xff && prog[last_sos + 1] == 0xda)) --last_sos;
  std::vector<uint8_t> many(prog.begin(), prog.end() - 2);
  for (int i = 0; i < kMaxJpegScans; ++i) many.insert(many.end(), prog.begin() + last_sos, prog.end() - 2);
  many.push_back(0xff), many.push_back(0xd9);
  {
    TempDir dir;
    expect_error([&] { one_jpeg(dir, many)->get(0, g); }, {"x.jpg", "more than 500 scans"});
  }
  std::vector<uint8_t> some(prog.begin(), prog.end() - 2);
  for (int i = 0; i < 20; ++i) some.insert(some.end(), prog.begin() + last_sos, prog.end() - 2);
  some.push_back(0xff), some.push_back(0xd9);
  TempDir dir;
  EXPECT_EQ(one_jpeg(dir, some)->get(0, g).input.shape(), (Shape{3, 23, 37}));
}

// Files the fuzz harnesses found crashing a reader (tests/data/fuzz_crashes), each now an error.
TEST(DataImageFolder, FuzzCrashersAreErrors) {
  struct Crasher {
    const char* file;      // in tests/data/fuzz_crashes
    const char* fragment;  // of the error
  };
  // The JPEGs crashed stb_image, which decoded JPEGs before libjpeg-turbo (data/jpeg.h); they stay
  // as regression inputs with libjpeg's reasons.
  const Crasher crashers[] = {
      // stb wrote past its Huffman size table (UBSan: index 257 out of bounds for stbi_uc[257]).
      {"jpeg_huffman_overflow.jpg", "Bogus Huffman table definition"},
      // The same with a table header cut off by the end of the file (stb read zeros past the end
      // and still counted the codes before it).
      {"jpeg_huffman_truncated.jpg", "Premature end of JPEG file"},
      // stb copied an empty first IDAT chunk to a null buffer (UBSan: null passed to memcpy).
      {"png_empty_idat.png", "empty PNG IDAT chunk"},
      // A progressive scan decoding with a Huffman table never defined (stb read it from
      // uninitialized memory: UBSan index -6 out of bounds, only with some heap contents).
      {"jpeg_undefined_huffman.jpg", "Invalid progressive parameters"},
      // A 112-byte PNG whose IDAT chunk claims ~1 GiB: stb allocated it (2 GiB after doubling) first.
      {"png_huge_idat.png", "runs past the end of the file"},
      // A 23-byte progressive JPEG claiming 12023x1280 pixels: stb allocated the frame (hundreds of
      // MB) before finding no scan data (libFuzzer's RSS limit). libjpeg finds no scan first;
      // DataImageFolder.JpegHeaderBounds checks the size bound itself.
      {"jpeg_huge_frame.jpg", "missing SOS marker"},
      // A baseline JPEG whose scan data runs into garbage: stb's bit count went negative (UBSan: shift
      // exponent 32 in stb_image.h).
      {"jpeg_stb_shift_exponent.jpg", "Unsupported marker type"},
  };
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/a");
  const std::string file = dir.path() + "/a/x.jpg";
  std::filesystem::copy_file(std::string(OCTET_TESTS_DIR) + "/data/fuzz_crashes/" + crashers[0].file, file);
  auto ds = image_folder(dir.path());
  Generator g(0);
  for (const Crasher& c : crashers) {
    std::filesystem::copy_file(std::string(OCTET_TESTS_DIR) + "/data/fuzz_crashes/" + c.file, file,
                               std::filesystem::copy_options::overwrite_existing);
    expect_error([&] { ds->get(0, g); }, {file, c.fragment});
  }
}

TEST(DataImageFolder, BadFolders) {
  TempDir dir;
  expect_error([&] { image_folder(dir.path() + "/missing"); }, {dir.path() + "/missing", "not a directory"});
  expect_error([&] { image_folder(dir.path()); }, {dir.path(), "no class subfolders"});
  std::filesystem::create_directories(dir.path() + "/a");
  expect_error([&] { image_folder(dir.path()); }, {dir.path() + "/a", "no .jpg/.jpeg/.png"});
  // A corrupt image fails in get(), naming the file; the others still load.
  std::ofstream(dir.path() + "/a/bad.png") << "definitely not a png";
  write_image(dir.path() + "/a/good.png", {1, 2, 3}, 1, 1, 3);
  auto ds = image_folder(dir.path());
  Generator g(0);
  expect_error([&] { ds->get(0, g); }, {dir.path() + "/a/bad.png", "cannot decode"});
  EXPECT_EQ(ds->get(1, g).input.shape(), (Shape{3, 1, 1}));
  // A truncated PNG.
  std::vector<uint8_t> png = read_file("test", dir.path() + "/a/good.png");
  png.resize(png.size() / 2);
  write_file("test", dir.path() + "/a/bad.png", png);
  expect_error([&] { ds->get(0, g); }, {dir.path() + "/a/bad.png"});
}

TEST(DataImageFolder, LoaderPropagatesDecodeErrors) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/a");
  for (int i = 0; i < 6; ++i) write_image(dir.path() + "/a/" + std::to_string(i) + ".png", {1, 2, 3}, 1, 1, 3);
  std::ofstream(dir.path() + "/a/3.png", std::ios::trunc) << "corrupt";
  auto ds = image_folder(dir.path());
  for (int64_t workers : {0, 2}) {
    DataLoader loader(ds, DataLoaderOptions().batch_size(2).shuffle(false).workers(workers));
    loader.start_epoch(0);
    EXPECT_TRUE(loader.next().has_value());
    expect_error([&] { loader.next(); }, {dir.path() + "/a/3.png"});
    std::optional<Batch> last = loader.next();  // the epoch goes on after the failed batch
    ASSERT_TRUE(last.has_value());
    EXPECT_EQ(last->inputs.shape(), (Shape{2, 3, 1, 1}));
    EXPECT_FALSE(loader.next().has_value());
  }
}

}  // namespace
}  // namespace octet
