#include "core/serialization.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

namespace octet {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* st_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::bf16:
      return "BF16";
    case DType::i8:
      return "I8";
    case DType::u8:
      return "U8";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType& out) {
  static const std::map<std::string, DType> names = {{"F32", DType::f32}, {"F64", DType::f64}, {"BF16", DType::bf16},
                                                     {"I8", DType::i8},   {"U8", DType::u8},   {"I32", DType::i32},
                                                     {"I64", DType::i64}};
  auto it = names.find(s);
  if (it == names.end()) return false;
  out = it->second;
  return true;
}

std::string errno_text() { return std::strerror(errno); }

// A valid header nests 3 levels ({"name": {"shape": [...]}}); anything much deeper is not one.
constexpr int kMaxHeaderDepth = 8;

// Removes the temporary files that writers of `target` killed mid-write left in `dir` (those
// whose process is gone); a live writer's file is left alone.
void remove_stale_temporaries(const fs::path& dir, const std::string& prefix) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove(it->path(), ec);
  }
}

// What a failed save left of `path`: the previous file, or nothing.
std::string untouched(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec) ? "(the previous " + path + " is untouched)" : "(nothing was written there)";
}

}  // namespace

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [k, t] : tensors)
    if (k == name) return t;
  OCTET_FAIL(path, ": no tensor named '", name, "'");
}

bool SafetensorsFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& kv) { return kv.first == name; });
}

void write_file_atomic(const std::string& path, const std::function<void(const ByteSink&)>& produce) {
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp_prefix = ".";  // built by appending: GCC 12 warns (-Wrestrict) on "." + string
  tmp_prefix.append(target.filename().string()).append(".tmp.");
  const std::string tmp_name = tmp_prefix + std::to_string(::getpid());
  std::string tmp = (dir / tmp_name).string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  OCTET_CHECK(fd >= 0, "save: cannot write ", path, ": ", errno_text(), " (creating its temporary file in ",
              dir.string(), ")");
  uint64_t total = 0;
  const ByteSink sink = [&](const char* data, size_t size) {
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::write(fd, data + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = errno_text();  // before untouched() can change errno
        OCTET_FAIL("save: writing ", path, " failed after ", total + done, " bytes: ", why, " ", untouched(path));
      }
      done += static_cast<size_t>(n);
    }
    total += size;
  };
  try {
    produce(sink);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    OCTET_FAIL("save: flushing ", path, " failed: ", why, " ", untouched(path));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    OCTET_FAIL("save: cannot replace ", path, ": ", why, " ", untouched(path));
  }
  // Make the rename itself durable.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  remove_stale_temporaries(dir, tmp_prefix);
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  write_file_atomic(path, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  json header = json::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  std::vector<Tensor> contiguous;
  for (const auto& [name, t] : tensors) {
    OCTET_CHECK(!name.empty() && name != "__metadata__", "save: invalid tensor name '", name, "' for ", path);
    OCTET_CHECK(names.insert(name).second, "save: duplicate tensor name '", name, "' for ", path);
    OCTET_CHECK(t.defined(), "save: tensor '", name, "' is undefined");
    Tensor c = t.device().is_cpu() ? t.detach().contiguous() : t.detach().to(Device::cpu()).contiguous();
    uint64_t nbytes = static_cast<uint64_t>(c.numel()) * dtype_size(c.dtype());
    header[name] = {{"dtype", st_dtype(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous.push_back(c);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the data buffer starts 8-byte aligned
  std::string bytes;
  bytes.reserve(8 + h.size() + offset);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  bytes += h;
  for (const Tensor& c : contiguous)
    bytes.append(static_cast<const char*>(c.raw_data()), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  write_file_atomic(path, bytes);
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& name) {
  auto fail = [&](auto&&... parts) { OCTET_FAIL(name, ": not a valid safetensors file: ", parts...); };
  if (bytes.size() < 8) fail("only ", bytes.size(), " bytes (an 8-byte header length is required)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > kMaxSafetensorsHeader) fail("header length ", n, " exceeds the limit of ", kMaxSafetensorsHeader);
  if (n > bytes.size() - 8) fail("header length ", n, " exceeds the file size ", bytes.size());
  std::string_view header_text(bytes.data() + 8, n);
  if (n == 0 || header_text[0] != '{') fail("the header does not start with '{'");
  json header;
  try {
    // A header nested deeper than any valid one is refused while parsing, before printing or
    // destroying it could recurse that deep.
    header = json::parse(header_text, [&](int depth, json::parse_event_t, json&) {
      if (depth > kMaxHeaderDepth) fail("header nests deeper than ", kMaxHeaderDepth, " levels");
      return true;
    });
  } catch (const json::parse_error& e) {
    // Its what() quotes the bytes it read, which in a damaged file are binary.
    fail("header is not valid JSON (at byte ", e.byte, " of ", n, "): the file is damaged or not a safetensors file");
  } catch (const json::exception&) {
    fail("header is not valid JSON: the file is damaged or not a safetensors file");
  }
  if (!header.is_object()) fail("header is not a JSON object");
  const uint64_t buffer_size = bytes.size() - 8 - n;
  const char* buffer = bytes.data() + 8 + n;

  SafetensorsFile out;
  out.path = name;
  struct Span {
    uint64_t begin, end;
    std::string key;
  };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) fail("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail("__metadata__ value for '", m.key(), "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      fail("entry '", key, "' needs dtype, shape and data_offsets");
    DType dt;
    if (!v["dtype"].is_string() || !parse_dtype(v["dtype"].get<std::string>(), dt))
      fail("entry '", key, "' has unsupported dtype ", v["dtype"].dump());
    const json& js = v["shape"];
    if (!js.is_array()) fail("entry '", key, "' has a shape that is not an array");
    Shape shape;
    uint64_t numel = 1;
    for (const json& d : js) {
      if (!d.is_number_unsigned()) fail("entry '", key, "' has a shape entry that is not a nonnegative integer");
      uint64_t s = d.get<uint64_t>();
      if (s > (uint64_t{1} << 40) || (s && numel > (uint64_t{1} << 62) / s)) fail("entry '", key, "' is too large");
      numel *= s;
      shape.push_back(static_cast<int64_t>(s));
    }
    const json& jo = v["data_offsets"];
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
      fail("entry '", key, "' needs data_offsets [begin, end]");
    uint64_t b = jo[0].get<uint64_t>(), e = jo[1].get<uint64_t>();
    if (b > e || e > buffer_size)
      fail("entry '", key, "' has offsets [", b, ", ", e, "] outside the ", buffer_size, "-byte buffer");
    // numel * dtype_size could wrap around 2^64 and match a short span (2^61 F64 values "need" 0 bytes).
    if (numel > UINT64_MAX / dtype_size(dt)) fail("entry '", key, "' is too large");
    if (e - b != numel * dtype_size(dt))
      fail("entry '", key, "' spans ", e - b, " bytes but shape ", shape, " of ", dtype_name(dt), " needs ",
           numel * dtype_size(dt));
    spans.push_back({b, e, key});
    Tensor t = from_blob(buffer + b, shape, dt);
    out.tensors.emplace_back(key, t);
  }
  // The tensors must tile the buffer exactly: no overlaps, no holes, nothing after the last.
  std::sort(spans.begin(), spans.end(),
            [](const Span& x, const Span& y) { return std::tie(x.begin, x.end) < std::tie(y.begin, y.end); });
  uint64_t at = 0;
  for (const Span& s : spans) {
    if (s.begin < at) fail("tensor '", s.key, "' overlaps the previous one");
    if (s.begin > at) fail("a hole of ", s.begin - at, " bytes before tensor '", s.key, "'");
    at = s.end;
  }
  if (at != buffer_size) fail(buffer_size - at, " bytes after the last tensor");
  // nlohmann::json orders keys alphabetically; keep the file's data order instead.
  std::map<std::string, uint64_t> begin_of;
  for (const Span& s : spans) begin_of[s.key] = s.begin;
  std::stable_sort(out.tensors.begin(), out.tensors.end(),
                   [&](const auto& x, const auto& y) { return begin_of[x.first] < begin_of[y.first]; });
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::error_code ec;
  OCTET_CHECK(fs::exists(path, ec), path, ": no such file");
  OCTET_CHECK(fs::is_regular_file(path, ec), path, ": not a file (a checkpoint is a .safetensors file)");
  std::ifstream in(path, std::ios::binary);
  OCTET_CHECK(in.good(), path, ": cannot open: ", errno_text());
  std::ostringstream ss;
  ss << in.rdbuf();
  OCTET_CHECK(!in.bad(), path, ": reading failed: ", errno_text());
  return parse_safetensors(ss.str(), path);
}

}  // namespace octet
