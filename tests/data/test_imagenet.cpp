// `octet data prepare imagenet` (data/imagenet.h) and the MAT-file reader under it (data/matlab.h):
// a devkit with a meta.mat written here in the MAT-file level 5 format (MathWorks' "MAT-File
// Format", chapter 1: as MATLAB writes it, a struct array of numeric fields stored in the smallest
// integer type, char fields as UTF-16, empty fields; plain and zlib-compressed), a validation tar,
// and the class folders they make.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/archive.h"
#include "data/imagenet.h"
#include "data/matlab.h"
#include "local_server.h"
#include "temp_dir.h"

namespace octet {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::TempDir;
using testing::write_archive;

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an octet::Error";
  return "";
}

// ---- a MAT-file writer (little-endian), enough for a devkit's meta.mat
std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string u16(uint16_t v) { return std::string(reinterpret_cast<const char*>(&v), 2); }

// A data element: tag, data, padding to 8 bytes; data of up to 4 bytes in the small element format.
std::string element(uint32_t type, const std::string& data, bool small_ok = true) {
  if (small_ok && !data.empty() && data.size() <= 4)
    return u32(static_cast<uint32_t>(data.size()) << 16 | type) + data + std::string(4 - data.size(), '\0');
  std::string e = u32(type) + u32(static_cast<uint32_t>(data.size())) + data;
  return e + std::string((8 - e.size() % 8) % 8, '\0');
}

enum : uint32_t { miINT8 = 1, miUINT8 = 2, miUINT16 = 4, miINT32 = 5, miUINT32 = 6, miDOUBLE = 9, miMATRIX = 14 };

std::string array(uint32_t cls, const std::vector<int32_t>& dims, const std::string& name, const std::string& body) {
  std::string d;
  for (int32_t v : dims) d += u32(static_cast<uint32_t>(v));
  return element(
      miMATRIX, element(miUINT32, u32(cls) + u32(0), false) + element(miINT32, d, false) + element(miINT8, name) + body,
      false);
}

// A double scalar stored as MATLAB stores small integers: uint8 or uint16 data.
std::string scalar(double v) {
  if (v < 256) return array(6, {1, 1}, "", element(miUINT8, std::string(1, static_cast<char>(v))));
  if (v < 65536) return array(6, {1, 1}, "", element(miUINT16, u16(static_cast<uint16_t>(v))));
  std::string b(8, '\0');
  std::memcpy(b.data(), &v, 8);
  return array(6, {1, 1}, "", element(miDOUBLE, b));
}

std::string chars(const std::string& s) {
  std::string d;
  for (char c : s) d += u16(static_cast<uint16_t>(c));
  return array(4, {1, static_cast<int32_t>(s.size())}, "", element(miUINT16, d));
}

std::string empty_double() { return array(6, {0, 0}, "", element(miDOUBLE, "", false)); }

// `synsets`: (id, wnid) pairs as a struct array with the devkit's fields (a few of them).
std::string meta_mat(const std::vector<std::pair<int, std::string>>& synsets, bool compressed) {
  const std::vector<std::string> fields = {"ILSVRC2012_ID", "WNID", "words", "children", "num_train_images"};
  std::string names;
  for (const std::string& f : fields) names += f + std::string(32 - f.size(), '\0');
  std::string body = element(miINT32, u32(32)) + element(miINT8, names, false);
  for (const auto& [id, wnid] : synsets)
    body += scalar(id) + chars(wnid) + chars("a thing, another") + empty_double() + scalar(1300);
  const std::string var = array(2, {static_cast<int32_t>(synsets.size()), 1}, "synsets", body);
  std::string header = "MATLAB 5.0 MAT-file, Platform: GLNXA64, Created on: a test";
  header.resize(116, ' ');
  header += std::string(8, '\0') + u16(0x0100) + "IM";
  if (!compressed) return header + var;
  uLongf n = compressBound(var.size());
  std::string z(n, '\0');
  compress(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>(var.data()), var.size());
  z.resize(n);
  return header + u32(15) + u32(static_cast<uint32_t>(z.size())) + z;  // miCOMPRESSED, not padded
}

std::string val_name(int i) {
  char b[40];
  std::snprintf(b, sizeof(b), "ILSVRC2012_val_%08d.JPEG", i);
  return b;
}

// A devkit with 3 leaf classes (IDs 1..3) and a parent synset, and 5 validation images.
struct Fixture {
  TempDir dir;
  std::string devkit = dir.path() + "/ILSVRC2012_devkit_t12.tar.gz", val = dir.path() + "/ILSVRC2012_img_val.tar";
  explicit Fixture(bool compressed = false) {
    const std::string mat =
        meta_mat({{1, "n01440764"}, {2, "n01443537"}, {3, "n01484850"}, {1001, "n00001740"}}, compressed);
    write_archive(devkit, {{"ILSVRC2012_devkit_t12/data/meta.mat", mat},
                           {"ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt", "3\n1\n2\n3\n1\n"},
                           {"ILSVRC2012_devkit_t12/readme.txt", "the devkit"}});
    std::vector<std::pair<std::string, std::string>> images;
    for (int i = 1; i <= 5; ++i) images.emplace_back(val_name(i), "jpeg " + std::to_string(i));
    write_archive(val, images);
  }
};

TEST(DataMatlab, ReadsTheDevkitsStructArray) {
  for (bool compressed : {false, true}) {
    const std::string mat = meta_mat({{1, "n01440764"}, {300, "n01443537"}, {70000, "n01484850"}}, compressed);
    const auto vars = read_mat_file(std::vector<uint8_t>(mat.begin(), mat.end()), "meta.mat");
    const MatValue& s = vars.at("synsets");
    ASSERT_EQ(s.kind, MatValue::Kind::structure);
    EXPECT_EQ(s.count(), 3);
    EXPECT_EQ(s.field(1, "ILSVRC2012_ID").numbers, std::vector<double>{300});    // stored as uint16
    EXPECT_EQ(s.field(2, "ILSVRC2012_ID").numbers, std::vector<double>{70000});  // stored as double
    EXPECT_EQ(s.field(2, "WNID").text, "n01484850");
    EXPECT_EQ(s.field(0, "children").count(), 0);
    EXPECT_NE(error_of([&] { s.field(0, "nope"); }).find("no field 'nope'"), std::string::npos);
  }
  const std::string mat = meta_mat({{1, "n01440764"}}, false);
  std::vector<uint8_t> cut(mat.begin(), mat.end() - 20);
  EXPECT_NE(error_of([&] { read_mat_file(cut, "meta.mat"); }).find("meta.mat: truncated"), std::string::npos);
  std::vector<uint8_t> junk(200, 'x');
  EXPECT_NE(error_of([&] { read_mat_file(junk, "x.mat"); }).find("not a MATLAB 5 MAT-file"), std::string::npos);
}

TEST(DataImagenet, SortsValidationImagesIntoClassFolders) {
  for (bool compressed : {false, true}) {
    Fixture f(compressed);
    const std::string root = f.dir.path() + "/imagenet";
    EXPECT_EQ(prepare_imagenet_val(f.val, f.devkit, root), 5);
    EXPECT_EQ(read_text(root + "/val/n01484850/" + val_name(1)), "jpeg 1");
    EXPECT_EQ(read_text(root + "/val/n01440764/" + val_name(2)), "jpeg 2");
    EXPECT_EQ(read_text(root + "/val/n01484850/" + val_name(4)), "jpeg 4");
    int64_t files = 0;
    for (const auto& e : fs::recursive_directory_iterator(root + "/val")) files += e.is_regular_file();
    EXPECT_EQ(files, 5);
  }
  // The devkit unpacked into a folder works the same.
  Fixture f;
  extract_archive(f.devkit, f.dir.path() + "/kit");
  for (const std::string& kit : {f.devkit, f.dir.path() + "/kit/ILSVRC2012_devkit_t12"}) {
    const ImagenetDevkit d = read_imagenet_devkit(kit);
    EXPECT_EQ(d.val_labels, (std::vector<int64_t>{3, 1, 2, 3, 1}));
    EXPECT_EQ(d.wnid.at(2), "n01443537");
    EXPECT_EQ(d.wnid.size(), 4u);
  }
}

TEST(DataImagenet, BadInputIsNamed) {
  Fixture f;
  const std::string root = f.dir.path() + "/imagenet";
  // An image the ground truth lists is missing from the tar.
  write_archive(f.val, {{val_name(1), "a"}, {val_name(2), "b"}});
  EXPECT_NE(error_of([&] { prepare_imagenet_val(f.val, f.devkit, root); }).find("lacks " + val_name(3)),
            std::string::npos);
  // A label meta.mat does not know.
  write_archive(f.devkit, {{"d/data/meta.mat", meta_mat({{1, "n01440764"}}, false)},
                           {"d/data/ILSVRC2012_validation_ground_truth.txt", "1\n7\n"}});
  EXPECT_NE(error_of([&] { read_imagenet_devkit(f.devkit); }).find(":2: ILSVRC2012_ID 7 is not in meta.mat"),
            std::string::npos);
  // Not a devkit.
  write_archive(f.devkit, {{"something/else.txt", "x"}});
  EXPECT_NE(error_of([&] { read_imagenet_devkit(f.devkit); }).find("has no data/meta.mat"), std::string::npos);
  EXPECT_NE(error_of([&] { prepare_imagenet_val(f.dir.path() + "/none.tar", f.devkit, root); }).find("none"),
            std::string::npos);
}

}  // namespace
}  // namespace octet
