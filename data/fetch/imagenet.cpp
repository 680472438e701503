#include "data/fetch/imagenet.h"

#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "data/fetch/archive.h"
#include "data/fetch/matlab.h"
#include "data/file_io.h"

namespace octet {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGroundTruth = "ILSVRC2012_validation_ground_truth.txt";
constexpr const char* kMeta = "meta.mat";

bool ends_with_file(const std::string& path, const std::string& file) {
  return path == file || path.ends_with("/" + file);
}

std::map<int64_t, std::string> parse_meta(const std::vector<uint8_t>& bytes, const std::string& where) {
  const std::map<std::string, MatValue> vars = read_mat_file(bytes, where);
  auto it = vars.find("synsets");
  OCTET_CHECK(it != vars.end() && it->second.kind == MatValue::Kind::structure, where,
              ": no struct array 'synsets' (not the ILSVRC2012 devkit's meta.mat?)");
  const MatValue& s = it->second;
  std::map<int64_t, std::string> wnid;
  for (int64_t i = 0; i < s.count(); ++i) {
    const MatValue& id = s.field(i, "ILSVRC2012_ID");
    const MatValue& w = s.field(i, "WNID");
    OCTET_CHECK(id.numbers.size() == 1 && w.kind == MatValue::Kind::text, where, ": synsets(", i + 1,
                ") has no ILSVRC2012_ID number or WNID text");
    OCTET_CHECK(id.numbers[0] >= 1 && id.numbers[0] <= 1e9 &&
                    id.numbers[0] == static_cast<double>(static_cast<int64_t>(id.numbers[0])),
                where, ": synsets(", i + 1, ") has ILSVRC2012_ID ", id.numbers[0], " (expected 1, 2, ...)");
    wnid[static_cast<int64_t>(id.numbers[0])] = w.text;
  }
  return wnid;
}

std::vector<int64_t> parse_ground_truth(const std::vector<uint8_t>& bytes, const std::string& where) {
  std::vector<int64_t> labels;
  std::string line;
  int64_t line_no = 0;
  auto flush = [&] {
    ++line_no;
    if (line.empty() || line == "\r") return;
    char* end = nullptr;
    const long v = std::strtol(line.c_str(), &end, 10);
    OCTET_CHECK(end != line.c_str() && (*end == '\0' || *end == '\r') && v >= 1, where, ":", line_no,
                ": expected an ILSVRC2012_ID (1, 2, ...), got '", line, "'");
    labels.push_back(v);
  };
  for (uint8_t c : bytes) {
    if (c == '\n') {
      flush();
      line.clear();
    } else {
      line += static_cast<char>(c);
    }
  }
  if (!line.empty()) flush();
  OCTET_CHECK(!labels.empty(), where, ": no labels");
  return labels;
}

// The index of "ILSVRC2012_val_00000042.JPEG" (42), or 0 for any other name.
int64_t val_index(const std::string& path) {
  const std::string base = fs::path(path).filename().string();
  unsigned long n = 0;
  int used = 0;
  if (base.size() != 28 || std::sscanf(base.c_str(), "ILSVRC2012_val_%8lu.JPEG%n", &n, &used) != 1 || used != 28)
    return 0;
  return static_cast<int64_t>(n);
}

}  // namespace

ImagenetDevkit read_imagenet_devkit(const std::string& devkit) {
  std::map<std::string, std::vector<uint8_t>> files;
  std::string meta_where = devkit + ": data/" + kMeta, truth_where = devkit + ": data/" + kGroundTruth;
  if (fs::is_directory(devkit)) {
    for (const char* f : {kMeta, kGroundTruth}) {
      std::string path = devkit + "/data/" + f;
      if (!file_exists(path)) path = devkit + "/" + f;
      OCTET_CHECK(file_exists(path), "imagenet: the devkit folder ", devkit, " has no data/", f,
                  " (give the unpacked ILSVRC2012_devkit_t12 folder or its .tar.gz)");
      files[f] = read_file("imagenet", path);
      (std::string(f) == kMeta ? meta_where : truth_where) = path;
    }
  } else {
    OCTET_CHECK(file_exists(devkit), "imagenet: devkit ", devkit, " not found (ILSVRC2012_devkit_t12.tar.gz)");
    for (auto& [path, bytes] : read_archive_files(
             devkit, [](const std::string& p) { return ends_with_file(p, kMeta) || ends_with_file(p, kGroundTruth); }))
      files[ends_with_file(path, kMeta) ? kMeta : kGroundTruth] = std::move(bytes);
    for (const char* f : {kMeta, kGroundTruth})
      OCTET_CHECK(files.count(f), "imagenet: the devkit ", devkit, " has no data/", f,
                  " (is it ILSVRC2012_devkit_t12.tar.gz?)");
  }
  ImagenetDevkit kit{parse_meta(files[kMeta], meta_where), parse_ground_truth(files[kGroundTruth], truth_where)};
  for (size_t i = 0; i < kit.val_labels.size(); ++i)
    OCTET_CHECK(kit.wnid.count(kit.val_labels[i]), truth_where, ":", i + 1, ": ILSVRC2012_ID ", kit.val_labels[i],
                " is not in meta.mat's synsets");
  return kit;
}

int64_t prepare_imagenet_val(const std::string& val_tar, const std::string& devkit, const std::string& root) {
  OCTET_CHECK(file_exists(val_tar), "imagenet: validation tar ", val_tar, " not found (ILSVRC2012_img_val.tar)");
  const ImagenetDevkit kit = read_imagenet_devkit(devkit);
  const int64_t n = static_cast<int64_t>(kit.val_labels.size());
  std::vector<bool> seen(static_cast<size_t>(n), false);
  int64_t others = 0;
  const int64_t written = extract_archive_files(val_tar, [&](const std::string& entry) -> std::string {
    const int64_t i = val_index(entry);
    if (i == 0) {
      ++others;
      return "";
    }
    OCTET_CHECK(i <= n, "imagenet: ", val_tar, ": ", entry, " has no label (the ground truth lists ", n, " images)");
    seen[static_cast<size_t>(i - 1)] = true;
    const std::string& wnid = kit.wnid.at(kit.val_labels[static_cast<size_t>(i - 1)]);
    return root + "/val/" + wnid + "/" + fs::path(entry).filename().string();
  });
  for (int64_t i = 0; i < n; ++i) {
    char name[40];
    std::snprintf(name, sizeof(name), "ILSVRC2012_val_%08lld.JPEG", static_cast<long long>(i + 1));
    OCTET_CHECK(seen[static_cast<size_t>(i)], "imagenet: ", val_tar, " lacks ", name, " (", written, " of ", n,
                " images found, ", others, " other files; is it ILSVRC2012_img_val.tar?)");
  }
  return written;
}

}  // namespace octet
