#include "quant/qmatmul.h"

#include <cmath>
#include <cstdlib>

namespace octet::quant {

namespace {

void check_input(const Tensor& x, int64_t cols, const QuantSpec& s) {
  OCTET_CHECK(x.defined() && x.dim() == 2 && x.size(1) == cols && x.dtype() == DType::f32, "quantized matmul (",
              s.name(), "): expected x f32 [B, ", cols, "], got ",
              x.defined() ? detail::str_cat(x.dtype(), " ", x.shape()) : std::string("an undefined tensor"));
}

class PbMatmul : public QuantMatmul {
 public:
  PbMatmul(const QuantSpec& s, PbWeights w) : QuantMatmul(s), w_(std::move(w)) {}
  Tensor forward(const Tensor& x, const Tensor& bias) override {
    check_input(x, w_.cols, spec_);
    if (!(w_.planes.device() == x.device())) w_ = w_.to(x.device());
    return pb_linear(w_, x.contiguous(), spec_.pb, bias);
  }
  int64_t rows() const override { return w_.rows; }
  int64_t cols() const override { return w_.cols; }
  void save(const std::string& prefix, NamedTensors& out) const override {
    out.emplace_back(prefix + "planes", w_.planes.to(Device::cpu()));
    out.emplace_back(prefix + "step", from_vector<double>({w_.step}, {1}));
    if (w_.row_steps.defined()) out.emplace_back(prefix + "row_steps", w_.row_steps.to(Device::cpu()));
  }

 private:
  PbWeights w_;
};

class Int8Matmul : public QuantMatmul {
 public:
  explicit Int8Matmul(QLinearWeights w) : QuantMatmul(QuantSpec::int8()), w_(std::move(w)) {}
  Tensor forward(const Tensor& x, const Tensor& bias) override {
    check_input(x, w_.cols, spec_);
    if (!(w_.codes.device() == x.device())) w_ = w_.to(x.device());
    return qlinear(w_, x.contiguous(), bias);
  }
  int64_t rows() const override { return w_.rows; }
  int64_t cols() const override { return w_.cols; }
  void save(const std::string& prefix, NamedTensors& out) const override {
    out.emplace_back(prefix + "codes", w_.codes.to(Device::cpu()));
    out.emplace_back(prefix + "row_sums", w_.row_sums.to(Device::cpu()));
    out.emplace_back(prefix + "scale", from_vector<float>({w_.w.scale}, {1}));
  }

 private:
  QLinearWeights w_;
};

// tensors[prefix + name], checked for dtype and shape, and taken out of the map.
Tensor take(std::map<std::string, Tensor>& tensors, const std::string& prefix, const std::string& name, DType dtype,
            const Shape& shape, const std::string& what) {
  auto it = tensors.find(prefix + name);
  OCTET_CHECK(it != tensors.end(), what, ": quantized layer data '", prefix + name, "' is missing");
  Tensor t = it->second.to(Device::cpu()).contiguous();
  tensors.erase(it);
  OCTET_CHECK(t.dtype() == dtype && t.shape() == shape, what, ": quantized layer data '", prefix + name, "' must be ",
              dtype, " ", shape, ", got ", t.dtype(), " ", t.shape());
  return t;
}

}  // namespace

std::string QuantSpec::name() const { return kind == Kind::int8 ? std::string("int8") : pb_config_name(pb); }

QuantSpec parse_quant_spec_name(const std::string& text, const std::string& what) {
  if (text == "int8") return QuantSpec::int8();
  const std::string usage = "expected a precision like 'w4a16', 'w4a8-paper', 'w4a16-row' or 'int8', got '";
  // The suffixes of pb_config_name, in its order.
  std::string base = text;
  PbConfig c;
  auto strip = [&](const std::string& suffix) {
    const bool has =
        base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (has) base.resize(base.size() - suffix.size());
    return has;
  };
  c.row_step = strip("-row");
  const size_t s_at = base.rfind("-paper-s");
  const std::string digits = s_at == std::string::npos ? std::string() : base.substr(s_at + 8);
  if (!digits.empty() && digits.size() <= 2 && digits.find_first_not_of("0123456789") == std::string::npos) {
    c.scheme = PbScheme::paper;
    c.a_shift = std::stoi(digits);
    base.resize(s_at);
  } else if (strip("-paper")) {
    c.scheme = PbScheme::paper;
  }
  const size_t a = base.find('a');
  OCTET_CHECK(base.size() >= 4 && base[0] == 'w' && a != std::string::npos && a > 1 && a + 1 < base.size(), what, ": ",
              usage, text, "'");
  auto number = [&](const std::string& s) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    OCTET_CHECK(!s.empty() && end == s.c_str() + s.size() && v > 0 && v < 100, what, ": ", usage, text, "'");
    return static_cast<int>(v);
  };
  c.w_bits = number(base.substr(1, a - 1));
  c.a_bits = number(base.substr(a + 1));
  check_pb_config(c, what);
  return QuantSpec::pbatch(c);
}

std::shared_ptr<QuantMatmul> make_quant_matmul(const Tensor& w, const QuantSpec& spec) {
  OCTET_CHECK(w.defined() && w.dim() == 2 && w.dtype() == DType::f32,
              "make_quant_matmul: expected a weight f32 [rows, cols], got ",
              w.defined() ? detail::str_cat(w.dtype(), " ", w.shape()) : std::string("an undefined tensor"));
  Tensor wd = w.detach().contiguous();
  if (spec.kind == QuantSpec::Kind::int8) return std::make_shared<Int8Matmul>(qlinear_prepare(wd));
  check_pb_config(spec.pb, "make_quant_matmul");
  return std::make_shared<PbMatmul>(spec, pb_preprocess(wd, spec.pb));
}

std::shared_ptr<QuantMatmul> load_quant_matmul(const QuantSpec& spec, int64_t rows, int64_t cols,
                                               std::map<std::string, Tensor>& tensors, const std::string& prefix,
                                               const std::string& what) {
  if (spec.kind == QuantSpec::Kind::int8) {
    QLinearWeights w;
    w.rows = rows, w.cols = cols;
    w.codes = take(tensors, prefix, "codes", DType::i8, {rows, cols}, what);
    w.row_sums = take(tensors, prefix, "row_sums", DType::i32, {rows}, what);
    const float scale = take(tensors, prefix, "scale", DType::f32, {1}, what).data<float>()[0];
    OCTET_CHECK(std::isfinite(scale) && scale > 0, what, ": quantized layer data '", prefix,
                "scale' must be a finite positive number, got ", scale);
    w.w = QParams{scale, 0, QType::s8};
    const int8_t* q = w.codes.data<int8_t>();
    const int32_t* sums = w.row_sums.data<int32_t>();
    for (int64_t r = 0; r < rows; ++r) {
      int32_t s = 0;
      // Every code is valid, -128 too: a weight beyond a searched clip saturates to the type's range
      // (quant/qgemm.h), and the kernels are exact over all of it.
      for (int64_t k = 0; k < cols; ++k) s += q[r * cols + k];
      OCTET_CHECK(s == sums[r], what, ": quantized layer data '", prefix, "row_sums' does not match the codes (row ", r,
                  ": ", sums[r], ", the codes sum to ", s, ")");
    }
    return std::make_shared<Int8Matmul>(std::move(w));
  }
  check_pb_config(spec.pb, what);
  PbWeights w;
  w.rows = rows, w.cols = cols, w.bits = spec.pb.w_bits;
  w.planes = take(tensors, prefix, "planes", DType::i64, {rows, w.bits + 1, pb_words(cols)}, what);
  w.step = take(tensors, prefix, "step", DType::f64, {1}, what).data<double>()[0];
  OCTET_CHECK(std::isfinite(w.step) && w.step > 0, what, ": quantized layer data '", prefix,
              "step' must be a finite positive number, got ", w.step);
  if (spec.pb.row_step) {
    w.row_steps = take(tensors, prefix, "row_steps", DType::f64, {rows}, what);
    for (int64_t r = 0; r < rows; ++r) {
      const double d = w.row_steps.data<double>()[r];
      OCTET_CHECK(std::isfinite(d) && d > 0, what, ": quantized layer data '", prefix, "row_steps' (row ", r,
                  ") must be a finite positive number, got ", d);
    }
  }
  // The bits past cols must be zero (the kernels count them).
  const int64_t words = pb_words(cols), full = cols / 64;
  auto column_bits = [&](int64_t k) {  // the bits of word k that hold columns
    return k < full ? ~uint64_t{0} : k == full && cols % 64 ? (uint64_t{1} << (cols % 64)) - 1 : uint64_t{0};
  };
  const uint64_t* p = reinterpret_cast<const uint64_t*>(w.planes.data<int64_t>());
  for (int64_t row = 0; row < rows * (w.bits + 1); ++row)
    for (int64_t k = full; k < words; ++k)
      OCTET_CHECK((p[row * words + k] & ~column_bits(k)) == 0, what, ": quantized layer data '", prefix,
                  "planes' has bits set past the ", cols, " columns");
  // The octet scheme's 1-bit codes are +-1, so plane 0 is all ones on the columns: the kernels skip it
  // (pb_gemm_1bit) and count popcount(X) instead, so a file whose plane 0 differs would give wrong
  // outputs silently. The paper scheme's may hold a 0: the kernels read plane 0 unless it is all ones.
  w.plane0_ones = w.bits == 1 && pb_plane0_all_ones(w.planes, cols);
  if (w.bits == 1 && spec.pb.scheme == PbScheme::octet)
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t k = 0; k < words; ++k)
        OCTET_CHECK(p[row * 2 * words + k] == column_bits(k), what, ": quantized layer data '", prefix,
                    "planes' is not a 1-bit layer's (plane 0 of row ", row, " must be all ones: the codes are +-1)");
  return std::make_shared<PbMatmul>(spec, std::move(w));
}

}  // namespace octet::quant
