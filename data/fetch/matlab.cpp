#include "data/fetch/matlab.h"

#include <zlib.h>

#include <cstring>

#include "core/error.h"

namespace octet {
namespace {

// Data types (miINT8 ...) and array classes (mxCELL_CLASS ...) of the format.
enum : uint32_t {
  miINT8 = 1,
  miUINT8,
  miINT16,
  miUINT16,
  miINT32,
  miUINT32,
  miSINGLE,
  miDOUBLE = 9,
  miINT64 = 12,
  miUINT64,
  miMATRIX,
  miCOMPRESSED,
  miUTF8,
  miUTF16,
  miUTF32
};
enum : uint32_t { mxCELL = 1, mxSTRUCT, mxOBJECT, mxCHAR, mxSPARSE, mxDOUBLE, mxUINT64 = 15 };
constexpr int kMaxDepth = 32;                         // nesting refused beyond this (a hostile file)
constexpr uint64_t kMaxInflated = uint64_t{1} << 26;  // 64 MB: the devkit's meta.mat holds ~0.3 MB

struct Element {
  uint32_t type;
  const uint8_t* data;
  uint64_t size;
};

uint32_t le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

class Reader {
 public:
  Reader(const uint8_t* p, uint64_t n, const std::string& name) : p_(p), end_(p + n), name_(name) {}
  bool done() const { return p_ == end_; }
  // The next element; `padded`: the data is followed by padding to a multiple of 8 bytes.
  Element next(bool padded = true) {
    need(8, "a data element's tag");
    const uint32_t first = le32(p_);
    if (first >> 16 != 0) {  // the small data element format: size, type and up to 4 bytes in 8
      Element e{first & 0xffff, p_ + 4, first >> 16};
      OCTET_CHECK(e.size <= 4, "mat: ", name_, ": a small data element of ", e.size, " bytes (at most 4)");
      p_ += 8;
      return e;
    }
    Element e{first, p_ + 8, le32(p_ + 4)};
    p_ += 8;
    need(e.size, "a data element's data");
    const uint64_t step = padded && e.type != miCOMPRESSED ? (e.size + 7) / 8 * 8 : e.size;
    p_ += std::min<uint64_t>(step, static_cast<uint64_t>(end_ - p_));
    return e;
  }

 private:
  void need(uint64_t n, const char* what) const {
    OCTET_CHECK(static_cast<uint64_t>(end_ - p_) >= n, "mat: ", name_, ": truncated (", what, " runs past the end)");
  }
  const uint8_t* p_;
  const uint8_t* end_;
  const std::string& name_;
};

int type_bytes(uint32_t type) {
  switch (type) {
    case miINT8:
    case miUINT8:
    case miUTF8:
      return 1;
    case miINT16:
    case miUINT16:
    case miUTF16:
      return 2;
    case miINT32:
    case miUINT32:
    case miSINGLE:
    case miUTF32:
      return 4;
    case miDOUBLE:
    case miINT64:
    case miUINT64:
      return 8;
    default:
      return 0;
  }
}

// The value of type T at p (unaligned, little-endian as the file's header checked), as a double.
template <typename T>
double load_as(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return static_cast<double>(v);
}

double number_at(const Element& e, uint64_t i) {
  const uint8_t* p = e.data + i * static_cast<uint64_t>(type_bytes(e.type));
  switch (e.type) {
    case miINT8:
      return load_as<int8_t>(p);
    case miUINT8:
      return load_as<uint8_t>(p);
    case miINT16:
      return load_as<int16_t>(p);
    case miUINT16:
      return load_as<uint16_t>(p);
    case miINT32:
      return load_as<int32_t>(p);
    case miUINT32:
      return load_as<uint32_t>(p);
    case miSINGLE:
      return load_as<float>(p);
    case miDOUBLE:
      return load_as<double>(p);
    case miINT64:
      return load_as<int64_t>(p);
    default:  // miUINT64
      return load_as<uint64_t>(p);
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | cp >> 6), out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | cp >> 12), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | cp >> 18), out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f)), out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Parser {
 public:
  explicit Parser(const std::string& name) : name_(name) {}

  // An miMATRIX element's content; `var` receives the array name.
  MatValue matrix(const Element& m, std::string* var, int depth) {
    OCTET_CHECK(depth < kMaxDepth, "mat: ", name_, ": arrays nested more than ", kMaxDepth, " deep");
    MatValue v;
    if (m.size == 0) return v;  // an empty array
    Reader r(m.data, m.size, name_);
    const Element flags = r.next();
    OCTET_CHECK(flags.type == miUINT32 && flags.size == 8, "mat: ", name_, ": an array without its flags");
    const uint32_t cls = le32(flags.data) & 0xff;
    OCTET_CHECK((le32(flags.data) & 0x800) == 0, "mat: ", name_, ": complex arrays are not supported");
    const Element dims = r.next();
    OCTET_CHECK(dims.type == miINT32 && dims.size >= 8 && dims.size % 4 == 0, "mat: ", name_,
                ": an array without its dimensions");
    int64_t count = 1;
    for (uint64_t i = 0; i < dims.size / 4; ++i) {
      const int32_t d = static_cast<int32_t>(le32(dims.data + 4 * i));
      OCTET_CHECK(d >= 0, "mat: ", name_, ": a negative dimension ", d);
      v.dims.push_back(d);
      count *= d;
      OCTET_CHECK(count <= (int64_t{1} << 32), "mat: ", name_, ": an array of more than 2^32 elements");
    }
    const Element array_name = r.next();
    if (var) *var = std::string(reinterpret_cast<const char*>(array_name.data), array_name.size);
    if (cls == mxCELL) {
      v.kind = MatValue::Kind::cell;
      for (int64_t i = 0; i < count; ++i) v.elements.push_back(matrix(sub_matrix(r), nullptr, depth + 1));
    } else if (cls == mxSTRUCT) {
      v.kind = MatValue::Kind::structure;
      const Element len = r.next();
      OCTET_CHECK(len.type == miINT32 && len.size == 4, "mat: ", name_, ": a struct without its field name length");
      const uint32_t l = le32(len.data);
      const Element names = r.next();
      OCTET_CHECK(l > 0 && names.size % l == 0, "mat: ", name_, ": field names of ", names.size,
                  " bytes are not a multiple of their length ", l);
      for (uint64_t f = 0; f < names.size / l; ++f) {
        const char* s = reinterpret_cast<const char*>(names.data + f * l);
        v.fields.emplace_back(s, strnlen(s, l));
      }
      for (int64_t i = 0; i < count * static_cast<int64_t>(v.fields.size()); ++i)
        v.elements.push_back(matrix(sub_matrix(r), nullptr, depth + 1));
    } else if (cls == mxCHAR) {
      v.kind = MatValue::Kind::text;
      const Element d = r.next();
      const int w = type_bytes(d.type);
      OCTET_CHECK(w > 0 && d.size % static_cast<uint64_t>(w) == 0, "mat: ", name_, ": char data of type ", d.type);
      if (d.type == miUTF8 || d.type == miINT8 || d.type == miUINT8)
        v.text.assign(reinterpret_cast<const char*>(d.data), d.size);
      else
        for (uint64_t i = 0; i < d.size / static_cast<uint64_t>(w); ++i) {
          const double cp = number_at(d, i);
          OCTET_CHECK(cp >= 0 && cp <= 0x10ffff && cp == static_cast<double>(static_cast<uint32_t>(cp)), "mat: ", name_,
                      ": character ", cp, " is not a Unicode code point");
          append_utf8(v.text, static_cast<uint32_t>(cp));
        }
    } else if (cls >= mxDOUBLE && cls <= mxUINT64) {
      const Element d = r.next();
      const int w = type_bytes(d.type);
      OCTET_CHECK(w > 0 && d.type != miUTF8 && d.type != miUTF16 && d.type != miUTF32, "mat: ", name_,
                  ": numeric data of type ", d.type);
      OCTET_CHECK(d.size == static_cast<uint64_t>(count) * static_cast<uint64_t>(w), "mat: ", name_, ": ", d.size,
                  " bytes of data for ", count, " elements of ", w, " bytes");
      for (int64_t i = 0; i < count; ++i) v.numbers.push_back(number_at(d, static_cast<uint64_t>(i)));
    } else {
      OCTET_FAIL("mat: ", name_, ": array class ", cls, " (sparse or object arrays) is not supported");
    }
    return v;
  }

 private:
  Element sub_matrix(Reader& r) {
    const Element e = r.next();
    OCTET_CHECK(e.type == miMATRIX, "mat: ", name_, ": expected an array element, got type ", e.type);
    return e;
  }
  const std::string& name_;
};

std::vector<uint8_t> inflate_all(const Element& e, const std::string& name) {
  z_stream z{};
  OCTET_CHECK(inflateInit(&z) == Z_OK, "mat: ", name, ": zlib failed to start");
  z.next_in = const_cast<Bytef*>(e.data);
  z.avail_in = static_cast<uInt>(e.size);
  std::vector<uint8_t> out;
  int rc = Z_OK;
  while (rc == Z_OK) {
    out.resize(out.size() + (1 << 20));
    z.next_out = out.data() + out.size() - (1 << 20);
    z.avail_out = 1 << 20;
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(out.size() - z.avail_out);
    if (out.size() > kMaxInflated) rc = Z_MEM_ERROR;
  }
  inflateEnd(&z);
  OCTET_CHECK(rc == Z_STREAM_END, "mat: ", name, ": a compressed variable does not inflate (zlib error ", rc, ")");
  return out;
}

}  // namespace

int64_t MatValue::count() const {
  int64_t n = dims.empty() ? 0 : 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const MatValue& MatValue::field(int64_t i, const std::string& name) const {
  OCTET_CHECK(kind == Kind::structure, "mat: field '", name, "' of an array that is not a struct");
  OCTET_CHECK(i >= 0 && i < count(), "mat: struct element ", i, " out of range [0, ", count(), ")");
  for (size_t f = 0; f < fields.size(); ++f)
    if (fields[f] == name) return elements[static_cast<size_t>(i) * fields.size() + f];
  OCTET_FAIL("mat: the struct has no field '", name, "'");
}

std::map<std::string, MatValue> read_mat_file(const std::vector<uint8_t>& bytes, const std::string& name) {
  OCTET_CHECK(bytes.size() >= 128 && std::memcmp(bytes.data(), "MATLAB 5.0 MAT-file", 19) == 0, name,
              ": not a MATLAB 5 MAT-file (its header does not start with 'MATLAB 5.0 MAT-file')");
  OCTET_CHECK(bytes[126] == 'I' && bytes[127] == 'M', name,
              ": a big-endian MAT-file (only little-endian files are supported)");
  std::map<std::string, MatValue> vars;
  Parser parser(name);
  Reader r(bytes.data() + 128, bytes.size() - 128, name);
  while (!r.done()) {
    const Element e = r.next();
    std::string var;
    if (e.type == miCOMPRESSED) {
      const std::vector<uint8_t> inner = inflate_all(e, name);
      Reader ir(inner.data(), inner.size(), name);
      const Element m = ir.next();
      OCTET_CHECK(m.type == miMATRIX, name, ": a compressed element that is not an array (type ", m.type, ")");
      MatValue v = parser.matrix(m, &var, 0);
      vars[var] = std::move(v);
    } else if (e.type == miMATRIX) {
      MatValue v = parser.matrix(e, &var, 0);
      vars[var] = std::move(v);
    }
  }
  return vars;
}

}  // namespace octet
