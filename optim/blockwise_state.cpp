#include "optim/blockwise_state.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "core/parallel.h"

namespace octet {

namespace {

Tensor map_tensor(quant::QuantMap m) {
  Tensor t = empty({256});
  std::memcpy(t.data<float>(), quant::quant_map(m).data(), 256 * sizeof(float));
  return t;
}

bool keeps_positive_nonzero(quant::QuantMap m) { return m == quant::QuantMap::dynamic_unsigned_nonzero; }

// The map whose values `values` holds; of several, the one that encodes as `configured` does.
quant::QuantMap map_of_values(const Tensor& values, quant::QuantMap configured, const std::string& buffer) {
  OCTET_CHECK(values.dtype() == DType::f32 && values.numel() == 256, "8-bit state '", buffer,
              "': expected a quantization map of 256 f32 values, got ", values.dtype(), " ", values.shape());
  const Tensor host = values.to(Device::cpu()).contiguous();
  std::optional<quant::QuantMap> found;
  for (quant::QuantMap m : quant::kAllQuantMaps) {
    if (std::memcmp(host.data<float>(), quant::quant_map(m).data(), 256 * sizeof(float)) != 0) continue;
    if (!found || keeps_positive_nonzero(m) == keeps_positive_nonzero(configured)) found = m;
  }
  OCTET_CHECK(found.has_value(), "8-bit state '", buffer, "': the checkpoint's quantization map (",
              host.data<float>()[0], " .. ", host.data<float>()[255], ") is none of octet's maps");
  return *found;
}

}  // namespace

BlockwiseState::BlockwiseState(const Tensor& param, std::vector<std::string> buffer_names,
                               std::vector<quant::QuantMap> maps, int64_t block_size)
    : ParamState(std::move(buffer_names)), numel_(param.numel()), block_size_(block_size) {
  OCTET_CHECK(param.dtype() == DType::f32, "8-bit optimizer state: parameter must be f32, got ", param.dtype());
  OCTET_CHECK(maps.size() == ParamState::buffer_names().size(), "8-bit optimizer state: ", maps.size(), " maps for ",
              ParamState::buffer_names().size(), " buffers");
  quant::check_block_size(block_size, "8-bit optimizer state");
  for (quant::QuantMap m : maps) {
    buffers_.push_back(quant::blockwise_zeros({numel_}, m, block_size, param.device()));
    map_values_.push_back(map_tensor(m));
  }
}

template <typename Body>
void BlockwiseState::blocks(Body body) {
  OCTET_CHECK(buffers_.empty() || buffers_[0].codes.device().is_cpu(),
              "8-bit optimizer state: for_each_block runs on the host; a state on ", buffers_[0].codes.device(),
              " is updated by its device's kernels");
  const int64_t nblocks = quant::num_blocks(numel_, block_size_);
  const size_t nb = buffers_.size();
  parallel_for(0, nblocks, 1, [&](int64_t begin, int64_t end) {
    // Per-thread scratch: one block of each buffer, in f32.
    std::vector<float> scratch(nb * static_cast<size_t>(block_size_));
    std::vector<float*> ptrs(nb);
    for (size_t i = 0; i < nb; ++i) ptrs[i] = scratch.data() + i * static_cast<size_t>(block_size_);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t start = b * block_size_;
      body(start, std::min(block_size_, numel_ - start), b, ptrs.data());
    }
  });
}

void BlockwiseState::for_each_block(const BlockUpdate<float>& fn) {
  blocks([&](int64_t start, int64_t n, int64_t b, float* const* ptrs) {
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const float* map = quant::quant_map(buffers_[i].map).data();
      quant::dequantize_block(buffers_[i].codes.data<uint8_t>() + start, n, buffers_[i].absmax.data<float>()[b], map,
                              ptrs[i]);
    }
    fn(StateBlock<float>{start, n, ptrs});
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const float* map = quant::quant_map(buffers_[i].map).data();
      quant::quantize_block(ptrs[i], n, map, buffers_[i].codes.data<uint8_t>() + start,
                            buffers_[i].absmax.data<float>() + b);
    }
  });
}

void BlockwiseState::read_blocks(const BlockRead<float>& fn) {
  blocks([&](int64_t start, int64_t n, int64_t b, float* const* ptrs) {
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const float* map = quant::quant_map(buffers_[i].map).data();
      quant::dequantize_block(buffers_[i].codes.data<uint8_t>() + start, n, buffers_[i].absmax.data<float>()[b], map,
                              ptrs[i]);
    }
    fn(StateBlock<const float>{start, n, ptrs});
  });
}

void BlockwiseState::for_each_block(const BlockUpdate<double>&) {
  OCTET_FAIL("8-bit optimizer state holds f32 parameters only (use 32-bit state for f64)");
}

NamedTensors BlockwiseState::tensors() const {
  NamedTensors out;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    out.emplace_back(buffer_names()[i] + ".codes", buffers_[i].codes);
    out.emplace_back(buffer_names()[i] + ".absmax", buffers_[i].absmax);
    out.emplace_back(buffer_names()[i] + ".map", map_values_[i]);
  }
  return out;
}

int64_t BlockwiseState::elements_per_entry(const std::string& suffix) const {
  if (suffix.ends_with(".absmax")) return block_size_;
  return suffix.ends_with(".map") ? 0 : 1;
}

void BlockwiseState::check_incoming(const std::function<const Tensor&(const std::string& suffix)>& incoming) const {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    map_of_values(incoming(buffer_names()[i] + ".map"), buffers_[i].map, buffer_names()[i]);
    check_scales("8-bit state", buffer_names()[i] + ".absmax", incoming(buffer_names()[i] + ".absmax"));
  }
}

void BlockwiseState::loaded() {
  for (size_t i = 0; i < buffers_.size(); ++i)
    buffers_[i].map = map_of_values(map_values_[i], buffers_[i].map, buffer_names()[i]);
}

}  // namespace octet
