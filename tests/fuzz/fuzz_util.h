// Shared by the fuzz harnesses: a scratch folder in memory (/dev/shm when present) and a writer,
// for readers that take a path. Each harness treats octet::Error as the expected answer to a bad
// file; anything else (a crash, a sanitizer report, another exception, a leak, a timeout, an
// allocation over libFuzzer's -malloc_limit_mb) is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace octet::fuzz {

inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::filesystem::path base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::filesystem::path d = base / ("octet_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

inline void write_bytes(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the scratch folder itself is broken: not a finding about octet
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
}

}  // namespace octet::fuzz
