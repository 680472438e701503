// A fresh directory under the system temp folder, removed with everything in it at scope exit.
//   TempDir dir;  write_idx(dir.path() + "/x.idx", bytes, {4});
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace octet::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("octet_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace octet::testing
