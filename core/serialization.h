// safetensors files: the checkpoint format (readable by the Python safetensors/PyTorch ecosystem).
// Layout: u64 little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// then the data buffer; offsets are relative to the buffer's start.
//   save_safetensors("run/last.safetensors", {{"w", w}}, {{"epoch", "3"}});
//   SafetensorsFile f = load_safetensors("run/last.safetensors");
// Writing is atomic: a temporary file in the same folder, flushed and renamed over the target,
// so a crash never leaves a half-written file under the final name; the temporary files of writers
// killed mid-write are removed by the next successful write of the same file. Reading validates
// everything the format implies (sizes, offsets, coverage, dtypes) and rejects bad files with
// an octet::Error that names the file and the problem.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "core/tensor.h"

namespace octet {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  NamedTensors tensors;  // in file order
  Metadata metadata;
  // The tensor named `name`, or an octet::Error naming the file and the key.
  const Tensor& at(const std::string& name) const;
  bool contains(const std::string& name) const;
  std::string path;
};

// Headers larger than this are refused (the reference reader's limit is 100 MB).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});
SafetensorsFile load_safetensors(const std::string& path);
// Parses an in-memory file; `name` is used in error messages.
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& name);

// Writes `bytes` to `path` atomically (temp file + fsync + rename + directory fsync).
void write_file_atomic(const std::string& path, const std::string& bytes);
// The same for content too large to hold in memory (an unpacked dataset file): `produce` hands its
// chunks to the sink. When it throws, or a write fails (a full disk), the temporary file is removed
// and nothing is left under `path`.
using ByteSink = std::function<void(const char* data, size_t size)>;
void write_file_atomic(const std::string& path, const std::function<void(const ByteSink&)>& produce);

}  // namespace octet
