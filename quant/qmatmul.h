// Quantized matrix products for inference layers: one interface over PrecisionBatching
// (quant/pbatch.h: n-bit weights as bit-planes, k-bit activations, popcounts) and the int8
// zero-point baseline (quant/qgemm.h: int8 weights, uint8 activations per row), so the quantized
// layers (layers/quantized.h: QuantLinear, QuantLstm) have one code path for both. The weights are
// preprocessed once, when the object is made (or read back from an export, without preprocessing);
// each call quantizes its activations per row, so a batch of rows gives the same rows as one at a
// time. Device-agnostic: forward runs on x's device, and the weights follow x the first time they
// meet it on another device (a model moved with Module::to after conversion still works).
//   auto mm = quant::make_quant_matmul(linear.weight_, quant::QuantSpec::pbatch({/*w_bits=*/4, /*a_bits=*/16}));
//   Tensor y = mm->forward(x, linear.bias_);   // x f32 [B, in] -> [B, out]
//   NamedTensors t;  mm->save("decoder.weight.", t);   // planes + step, for an export
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/serialization.h"
#include "quant/pbatch.h"
#include "quant/qgemm.h"

namespace octet::quant {

// What a quantized layer computes with.
struct QuantSpec {
  enum class Kind : uint8_t { pbatch, int8 };
  Kind kind = Kind::pbatch;
  PbConfig pb;  // kind pbatch only

  static QuantSpec pbatch(const PbConfig& c) { return {Kind::pbatch, c}; }
  static QuantSpec int8() { return {Kind::int8, PbConfig{}}; }
  // "w4a16" (pb_config_name) or "int8".
  std::string name() const;
  // The clip search is not compared (it only changes the preprocessing).
  bool operator==(const QuantSpec& o) const {
    return kind == o.kind &&
           (kind == Kind::int8 || (pb.w_bits == o.pb.w_bits && pb.a_bits == o.pb.a_bits && pb.scheme == o.pb.scheme &&
                                   pb.row_step == o.pb.row_step && pb.a_shift == o.pb.a_shift));
  }
};
// The inverse of name(): "w4a16" (with pb_config_name's suffixes: "w4a8-paper-s4-row") or "int8"; an
// Error naming `what` otherwise (bits checked too).
QuantSpec parse_quant_spec_name(const std::string& text, const std::string& what);

class QuantMatmul {
 public:
  virtual ~QuantMatmul() = default;
  // y f32 [B, rows] = x [B, cols] W^T + bias [rows] (undefined: none), computed on x's device.
  // x: f32, 2-D, any strides (made contiguous). An Error for other shapes or dtypes.
  virtual Tensor forward(const Tensor& x, const Tensor& bias = Tensor()) = 0;
  virtual int64_t rows() const = 0;
  virtual int64_t cols() const = 0;
  const QuantSpec& spec() const { return spec_; }
  // The preprocessed weights as named tensors (prefix + "planes"/"step"[/"row_steps"], or
  // prefix + "codes"/"row_sums"/"scale"), on the CPU: what an export stores.
  virtual void save(const std::string& prefix, NamedTensors& out) const = 0;

 protected:
  explicit QuantMatmul(const QuantSpec& s) : spec_(s) {}
  QuantSpec spec_;
};

// Preprocesses W f32 [rows, cols] (any device) for `spec`; the result lives on W's device.
std::shared_ptr<QuantMatmul> make_quant_matmul(const Tensor& w, const QuantSpec& spec);
// The inverse of save(): reads prefix + ... from `tensors` (removing what it takes) and checks
// them against the layer's matrix [rows, cols] and `spec`: dtypes, shapes, a finite positive step
// or scale, zero padding bits, row sums that match the codes. A missing or bad tensor is an Error
// naming `what` (the file) and the tensor.
std::shared_ptr<QuantMatmul> load_quant_matmul(const QuantSpec& spec, int64_t rows, int64_t cols,
                                               std::map<std::string, Tensor>& tensors, const std::string& prefix,
                                               const std::string& what);

}  // namespace octet::quant
