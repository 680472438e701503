// A small ImageNet devkit and validation tar for the `data prepare imagenet` tests: a meta.mat
// written in the MAT-file level 5 format (MathWorks' "MAT-File Format", chapter 1) as MATLAB writes
// one -- a struct array whose numeric fields are stored in the smallest integer type, char fields as
// UTF-16, empty fields; plain or zlib-compressed.
//   Fixture f;   prepare_imagenet_val(f.val, f.devkit, f.dir.path() + "/imagenet");
#pragma once

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "local_server.h"
#include "temp_dir.h"

namespace octet::testing {

// ---- a MAT-file writer (little-endian), enough for a devkit's meta.mat
inline std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
inline std::string u16(uint16_t v) { return std::string(reinterpret_cast<const char*>(&v), 2); }

// A data element: tag, data, padding to 8 bytes; data of up to 4 bytes in the small element format.
inline std::string element(uint32_t type, const std::string& data, bool small_ok = true) {
  if (small_ok && !data.empty() && data.size() <= 4)
    return u32(static_cast<uint32_t>(data.size()) << 16 | type) + data + std::string(4 - data.size(), '\0');
  std::string e = u32(type) + u32(static_cast<uint32_t>(data.size())) + data;
  return e + std::string((8 - e.size() % 8) % 8, '\0');
}

enum : uint32_t { miINT8 = 1, miUINT8 = 2, miUINT16 = 4, miINT32 = 5, miUINT32 = 6, miDOUBLE = 9, miMATRIX = 14 };

inline std::string array(uint32_t cls, const std::vector<int32_t>& dims, const std::string& name,
                         const std::string& body) {
  std::string d;
  for (int32_t v : dims) d += u32(static_cast<uint32_t>(v));
  return element(
      miMATRIX, element(miUINT32, u32(cls) + u32(0), false) + element(miINT32, d, false) + element(miINT8, name) + body,
      false);
}

// A double scalar stored as MATLAB stores small integers: uint8 or uint16 data.
inline std::string scalar(double v) {
  if (v < 256) return array(6, {1, 1}, "", element(miUINT8, std::string(1, static_cast<char>(v))));
  if (v < 65536) return array(6, {1, 1}, "", element(miUINT16, u16(static_cast<uint16_t>(v))));
  std::string b(8, '\0');
  std::memcpy(b.data(), &v, 8);
  return array(6, {1, 1}, "", element(miDOUBLE, b));
}

inline std::string chars(const std::string& s) {
  std::string d;
  for (char c : s) d += u16(static_cast<uint16_t>(c));
  return array(4, {1, static_cast<int32_t>(s.size())}, "", element(miUINT16, d));
}

inline std::string empty_double() { return array(6, {0, 0}, "", element(miDOUBLE, "", false)); }

// The 128-byte header of a little-endian MAT-file.
inline std::string mat_header() {
  std::string header = "MATLAB 5.0 MAT-file, Platform: GLNXA64, Created on: a test";
  header.resize(116, ' ');
  return header + std::string(8, '\0') + u16(0x0100) + "IM";
}

// `synsets`: (id, wnid) pairs as a struct array with the devkit's fields (a few of them).
inline std::string meta_mat(const std::vector<std::pair<int, std::string>>& synsets, bool compressed) {
  const std::vector<std::string> fields = {"ILSVRC2012_ID", "WNID", "words", "children", "num_train_images"};
  std::string names;
  for (const std::string& f : fields) names += f + std::string(32 - f.size(), '\0');
  std::string body = element(miINT32, u32(32)) + element(miINT8, names, false);
  for (const auto& [id, wnid] : synsets)
    body += scalar(id) + chars(wnid) + chars("a thing, another") + empty_double() + scalar(1300);
  const std::string var = array(2, {static_cast<int32_t>(synsets.size()), 1}, "synsets", body);
  const std::string header = mat_header();
  if (!compressed) return header + var;
  uLongf n = compressBound(var.size());
  std::string z(n, '\0');
  compress(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>(var.data()), var.size());
  z.resize(n);
  return header + u32(15) + u32(static_cast<uint32_t>(z.size())) + z;  // miCOMPRESSED, not padded
}

inline std::string val_name(int i) {
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

}  // namespace octet::testing
