// Reading archives (tar, tar.gz, zip, ... through libarchive): what the dataset downloader unpacks
// and what `octet data prepare imagenet` sorts. Each file is written to its destination atomically
// (core/serialization.h's write_file_atomic), so an interrupted unpack (a full disk, Ctrl-C) leaves
// only whole files. Entry paths that are absolute or climb out with ".." are refused.
//   extract_archive("data/cifar10/cifar-10-binary.tar.gz", "data/cifar10");
//   extract_archive("wikitext-2-v1.zip", "data/wikitext-2", "wikitext-2/");   // drops that folder
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace octet {

// Writes every regular file of `archive` under `dir`, at its path in the archive with the leading
// `strip` removed (entries outside `strip` are skipped). Returns the files written.
std::vector<std::string> extract_archive(const std::string& archive, const std::string& dir,
                                         const std::string& strip = "");

// Calls `destination` with the path of each regular file in the archive; where it returns a path,
// the file is written there (its folder created), where it returns "" the file is skipped.
// Returns the number of files written.
int64_t extract_archive_files(const std::string& archive,
                              const std::function<std::string(const std::string& entry)>& destination);

// The content of the archive's files whose path `want` accepts, by path (small files: a devkit's
// ground truth and meta.mat). At most `max_bytes` per file.
std::map<std::string, std::vector<uint8_t>> read_archive_files(const std::string& archive,
                                                               const std::function<bool(const std::string&)>& want,
                                                               uint64_t max_bytes = uint64_t{1} << 28);

}  // namespace octet
