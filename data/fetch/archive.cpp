#include "data/fetch/archive.h"

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <memory>

#include "core/error.h"
#include "core/serialization.h"

namespace octet {
namespace {

namespace fs = std::filesystem;
using ArchivePtr = std::unique_ptr<struct archive, int (*)(struct archive*)>;

ArchivePtr open_archive(const std::string& path) {
  ArchivePtr a(archive_read_new(), archive_read_free);
  OCTET_CHECK(a != nullptr, "archive: out of memory opening ", path);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_all(a.get());
  OCTET_CHECK(archive_read_open_filename(a.get(), path.c_str(), 1 << 16) == ARCHIVE_OK, "archive: cannot open ", path,
              ": ", archive_error_string(a.get()));
  return a;
}

// Calls `on_file(entry path)` for each regular file, with the archive positioned at its data.
void for_each_file(const std::string& path, const std::function<void(struct archive*, const std::string&)>& on_file) {
  ArchivePtr a = open_archive(path);
  struct archive_entry* e = nullptr;
  for (;;) {
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    OCTET_CHECK(r == ARCHIVE_OK || r == ARCHIVE_WARN, "archive: ", path, ": ", archive_error_string(a.get()),
                " (a truncated or corrupt file?)");
    if (archive_entry_filetype(e) != AE_IFREG) continue;  // folders are made as needed; links are not followed
    const char* name = archive_entry_pathname(e);
    OCTET_CHECK(name != nullptr, "archive: ", path, ": an entry without a path");
    on_file(a.get(), name);
  }
}

// Streams the current entry's data into `sink`, at most `max_bytes`.
void copy_data(struct archive* a, const std::string& archive, const std::string& entry, const ByteSink& sink,
               uint64_t max_bytes = UINT64_MAX) {
  char buf[1 << 16];
  uint64_t total = 0;
  for (;;) {
    const la_ssize_t n = archive_read_data(a, buf, sizeof(buf));
    OCTET_CHECK(n >= 0, "archive: ", archive, ": reading ", entry, " failed: ", archive_error_string(a),
                " (a truncated or corrupt file?)");
    if (n == 0) return;
    total += static_cast<uint64_t>(n);
    OCTET_CHECK(total <= max_bytes, "archive: ", archive, ": ", entry, " is larger than ", max_bytes, " bytes");
    sink(buf, static_cast<size_t>(n));
  }
}

// An entry's path checked to stay inside the destination.
std::string safe_relative(const std::string& archive, const std::string& entry) {
  fs::path p(entry);
  OCTET_CHECK(!entry.empty() && p.is_relative(), "archive: ", archive, ": refusing entry '", entry,
              "' (an absolute path)");
  for (const fs::path& part : p)
    OCTET_CHECK(part != "..", "archive: ", archive, ": refusing entry '", entry, "' (it climbs out with ..)");
  return p.lexically_normal().string();
}

}  // namespace

int64_t extract_archive_files(const std::string& archive,
                              const std::function<std::string(const std::string& entry)>& destination) {
  int64_t written = 0;
  for_each_file(archive, [&](struct archive* a, const std::string& entry) {
    const std::string dest = destination(safe_relative(archive, entry));
    if (dest.empty()) return;
    const fs::path parent = fs::path(dest).parent_path();
    std::error_code ec;
    if (!parent.empty()) fs::create_directories(parent, ec);
    OCTET_CHECK(!ec, "archive: cannot create folder ", parent.string(), ": ", ec.message());
    write_file_atomic(dest, [&](const ByteSink& sink) { copy_data(a, archive, entry, sink); });
    ++written;
  });
  return written;
}

std::vector<std::string> extract_archive(const std::string& archive, const std::string& dir, const std::string& strip) {
  std::vector<std::string> files;
  extract_archive_files(archive, [&](const std::string& entry) -> std::string {
    if (!entry.starts_with(strip) || entry.size() == strip.size()) return "";
    files.push_back((fs::path(dir) / entry.substr(strip.size())).string());
    return files.back();
  });
  return files;
}

std::map<std::string, std::vector<uint8_t>> read_archive_files(const std::string& archive,
                                                               const std::function<bool(const std::string&)>& want,
                                                               uint64_t max_bytes) {
  std::map<std::string, std::vector<uint8_t>> out;
  for_each_file(archive, [&](struct archive* a, const std::string& entry) {
    if (!want(entry)) return;
    std::vector<uint8_t>& bytes = out[entry];
    copy_data(
        a, archive, entry, [&](const char* p, size_t n) { bytes.insert(bytes.end(), p, p + n); }, max_bytes);
  });
  return out;
}

}  // namespace octet
