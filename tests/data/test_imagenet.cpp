// `octet data prepare imagenet` (data/fetch/imagenet.h) and the MAT-file reader under it (data/fetch/matlab.h):
// a devkit with a meta.mat written here in the MAT-file level 5 format (MathWorks' "MAT-File
// Format", chapter 1: as MATLAB writes it, a struct array of numeric fields stored in the smallest
// integer type, char fields as UTF-16, empty fields; plain and zlib-compressed), a validation tar,
// and the class folders they make.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/fetch/archive.h"
#include "data/fetch/imagenet.h"
#include "data/fetch/matlab.h"
#include "imagenet_fixture.h"
#include "local_server.h"
#include "temp_dir.h"
#include "tests/error_of.h"

namespace octet {
namespace {

namespace fs = std::filesystem;
using testing::Fixture;
using testing::meta_mat;
using testing::read_text;
using testing::TempDir;
using testing::val_name;
using testing::write_archive;

using testing::error_of;

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
  // A character that is no code point (fuzz_matlab found its conversion overflowing): an error.
  std::string big(8, '\0');
  const double too_big = 1.35e16;
  std::memcpy(big.data(), &too_big, 8);
  const std::string bad =
      testing::mat_header() + testing::array(4, {1, 1}, "c", testing::element(testing::miDOUBLE, big));
  EXPECT_NE(error_of([&] {
              read_mat_file(std::vector<uint8_t>(bad.begin(), bad.end()), "c.mat");
            }).find("is not a Unicode code point"),
            std::string::npos);
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
