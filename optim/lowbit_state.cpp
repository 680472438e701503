#include "optim/lowbit_state.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "core/parallel.h"
#include "quant/blockwise.h"
#include "quant/lowbit.h"

namespace octet {

namespace {

constexpr size_t kMaxBuffers = 8;  // state buffers, and the dims rank-1 takes (as cuda::kMaxRank1Dims)

Tensor map_tensor(quant::QuantMap4 m) {
  Tensor t = empty({16});
  std::memcpy(t.data<float>(), quant::quant_map4(m).data(), 16 * sizeof(float));
  return t;
}

// The maxima of a rank-1 buffer as pointers (for quant::rank1_*).
std::array<float*, kMaxBuffers> maxima_of(const LowBitState::Buffer& b) {
  std::array<float*, kMaxBuffers> out{};
  for (size_t d = 0; d < b.maxima.size(); ++d) out[d] = b.maxima[d].data<float>();
  return out;
}

}  // namespace

LowBitState::LowBitState(const Tensor& param, std::vector<std::string> buffer_names, const std::vector<bool>& is_signed,
                         Shard shard)
    : ParamState(std::move(buffer_names)),
      numel_(0),
      offset_(shard.first),
      max_over_ranks_(std::move(shard.max_over_ranks)) {
  OCTET_CHECK(param.dtype() == DType::f32, "4-bit optimizer state: parameter must be f32, got ", param.dtype());
  const int64_t whole = param.numel(), last = shard.last < 0 ? whole : shard.last;
  // An empty range past the end may start anywhere.
  OCTET_CHECK(offset_ >= 0 && offset_ <= last && last <= whole && (offset_ % kBlock == 0 || offset_ == whole),
              "4-bit optimizer state: the range [", offset_, ", ", last, ") of a parameter of ", whole,
              " elements must start on a block of ", kBlock);
  numel_ = last - offset_;
  OCTET_CHECK(is_signed.size() == ParamState::buffer_names().size(), "4-bit optimizer state: ", is_signed.size(),
              " signs for ", ParamState::buffer_names().size(), " buffers");
  OCTET_CHECK(is_signed.size() <= kMaxBuffers, "4-bit optimizer state: at most ", kMaxBuffers, " buffers, got ",
              is_signed.size());
  // Rank-1 over the dims of extent > 1, where its scales cost no more than block-wise ones (4 bytes
  // per 128 elements): a [1, n] or [n, 2] parameter is block-wise, and so is one of more than
  // kMaxBuffers such dims.
  Shape squeezed;
  int64_t scale_count = 0;
  for (int64_t extent : param.shape())
    if (extent > 1) squeezed.push_back(extent), scale_count += extent;
  const bool rank1_fits = squeezed.size() >= 2 && squeezed.size() <= kMaxBuffers && scale_count * kBlock <= whole;
  if (rank1_fits) shape_ = squeezed;
  const Device dev = param.device();
  for (bool s : is_signed) {
    Buffer b;
    b.map = s ? quant::QuantMap4::dynamic_signed : quant::QuantMap4::linear_unsigned;
    b.rank1 = !s && rank1_fits;
    b.codes = zeros({quant::packed4_bytes(numel_)}, TensorOptions(DType::u8).device(dev));
    if (b.rank1) {
      for (int64_t extent : shape_) b.maxima.push_back(zeros({extent}, TensorOptions(dev)));
    } else {
      b.absmax = zeros({quant::num_blocks(numel_, kBlock)}, TensorOptions(dev));
    }
    b.map_values = map_tensor(b.map);
    buffers_.push_back(std::move(b));
  }
}

LowBitState::LowBitState(const Tensor& param, std::vector<std::string> buffer_names, const std::vector<bool>& is_signed)
    : LowBitState(param, std::move(buffer_names), is_signed, Shard{}) {}

template <typename Body>
void LowBitState::chunks(Body body) {
  OCTET_CHECK(buffers_.empty() || buffers_[0].codes.device().is_cpu(),
              "4-bit optimizer state: for_each_block runs on the host; a state on ", buffers_[0].codes.device(),
              " is updated by its device's kernels");
  const int64_t nchunks = quant::num_blocks(numel_, kChunk);
  const size_t nb = buffers_.size();
  parallel_for(0, nchunks, 1, [&](int64_t begin, int64_t end) {
    // Per-thread scratch: one chunk of each buffer, then one chunk of scales.
    std::vector<float> scratch((nb + 1) * static_cast<size_t>(kChunk));
    std::array<float*, kMaxBuffers + 1> ptrs{};
    for (size_t i = 0; i <= nb; ++i) ptrs[i] = scratch.data() + i * static_cast<size_t>(kChunk);
    body(begin, end, ptrs.data(), ptrs[nb]);
  });
}

void LowBitState::decode_chunk(size_t i, int64_t start, int64_t n, float* scales, float* out) const {
  const Buffer& b = buffers_[i];
  const uint8_t* codes = b.codes.data<uint8_t>() + start / 2;
  if (b.rank1) {
    const std::array<float*, kMaxBuffers> maxima = maxima_of(b);
    quant::rank1_scales(shape_, maxima.data(), offset_ + start, n, scales);
    quant::decode4(codes, n, scales, 0.0f, b.map, out);
    return;
  }
  const float* absmax = b.absmax.data<float>() + start / kBlock;
  for (int64_t k = 0; k < n; k += kBlock)
    quant::decode4(codes + k / 2, std::min(kBlock, n - k), nullptr, absmax[k / kBlock], b.map, out + k);
}

void LowBitState::encode_blockwise(size_t i, int64_t start, int64_t n, const float* values) {
  Buffer& b = buffers_[i];
  uint8_t* codes = b.codes.data<uint8_t>() + start / 2;
  float* absmax = b.absmax.data<float>() + start / kBlock;
  for (int64_t k = 0; k < n; k += kBlock) {
    const int64_t len = std::min(kBlock, n - k);
    absmax[k / kBlock] = quant::absmax4(values + k, len);
    quant::encode4(values + k, len, nullptr, absmax[k / kBlock], b.map, codes + k / 2);
  }
}

void LowBitState::for_each_block(const BlockUpdate<float>& fn) {
  // A rank-1 buffer's new values, whole, and their maxima: its scales need them all before it is
  // encoded. The maxima are gathered per thread as the chunks are updated, then merged (exact).
  std::vector<Tensor> fresh(buffers_.size());
  std::vector<std::vector<Tensor>> fresh_maxima(buffers_.size());
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (!buffers_[i].rank1) continue;
    fresh[i] = empty({numel_});
    for (int64_t extent : shape_) fresh_maxima[i].push_back(zeros({extent}));
  }
  std::mutex merge;
  chunks([&](int64_t first, int64_t last, float* const* scratch, float* scales) {
    std::vector<std::optional<quant::Rank1Maxima>> local(buffers_.size());
    for (int64_t c = first; c < last; ++c) {
      const int64_t start = c * kChunk, n = std::min(kChunk, numel_ - start);
      std::array<float*, kMaxBuffers> work{};
      for (size_t i = 0; i < buffers_.size(); ++i) {
        work[i] = buffers_[i].rank1 ? fresh[i].data<float>() + start : scratch[i];
        decode_chunk(i, start, n, scales, work[i]);
      }
      fn(StateBlock<float>{start, n, work.data()});
      for (size_t i = 0; i < buffers_.size(); ++i) {
        if (!buffers_[i].rank1) {
          encode_blockwise(i, start, n, work[i]);
          continue;
        }
        if (!local[i]) local[i].emplace(shape_);
        local[i]->add(offset_ + start, n, work[i]);
      }
    }
    std::lock_guard<std::mutex> lock(merge);
    for (size_t i = 0; i < buffers_.size(); ++i) {
      if (!local[i]) continue;
      std::array<float*, kMaxBuffers> maxima{};
      for (size_t d = 0; d < shape_.size(); ++d) maxima[d] = fresh_maxima[i][d].data<float>();
      local[i]->merge_into(maxima.data());
    }
  });
  std::vector<Tensor> all_maxima;  // of every rank-1 buffer, made the whole parameter's at once
  for (const std::vector<Tensor>& m : fresh_maxima) all_maxima.insert(all_maxima.end(), m.begin(), m.end());
  merge_maxima(all_maxima);
  for (size_t i = 0, next = 0; i < buffers_.size(); ++i) {
    Buffer& b = buffers_[i];
    if (!b.rank1) continue;
    for (size_t d = 0; d < shape_.size(); ++d) b.maxima[d].copy_(all_maxima[next++]);
    const float* values = fresh[i].data<float>();
    const std::array<float*, kMaxBuffers> maxima = maxima_of(b);
    chunks([&](int64_t first, int64_t last, float* const*, float* scales) {
      for (int64_t c = first; c < last; ++c) {
        const int64_t start = c * kChunk, n = std::min(kChunk, numel_ - start);
        quant::rank1_scales(shape_, maxima.data(), offset_ + start, n, scales);
        quant::encode4(values + start, n, scales, 0.0f, b.map, b.codes.data<uint8_t>() + start / 2);
      }
    });
  }
}

void LowBitState::read_blocks(const BlockRead<float>& fn) {
  chunks([&](int64_t first, int64_t last, float* const* scratch, float* scales) {
    for (int64_t c = first; c < last; ++c) {
      const int64_t start = c * kChunk, n = std::min(kChunk, numel_ - start);
      for (size_t i = 0; i < buffers_.size(); ++i) decode_chunk(i, start, n, scales, scratch[i]);
      fn(StateBlock<const float>{start, n, scratch});
    }
  });
}

bool LowBitState::collective() const {
  return max_over_ranks_ && std::any_of(buffers_.begin(), buffers_.end(), [](const Buffer& b) { return b.rank1; });
}

void LowBitState::merge_maxima(std::vector<Tensor>& maxima) const {
  if (max_over_ranks_ && !maxima.empty()) max_over_ranks_(maxima);
}

void LowBitState::for_each_block(const BlockUpdate<double>&) {
  OCTET_FAIL("4-bit optimizer state holds f32 parameters only (use 32-bit state for f64)");
}

NamedTensors LowBitState::tensors() const {
  NamedTensors out;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    const std::string& name = buffer_names()[i];
    out.emplace_back(name + ".codes", b.codes);
    if (b.rank1) {
      for (size_t d = 0; d < b.maxima.size(); ++d) out.emplace_back(name + ".max" + std::to_string(d), b.maxima[d]);
    } else {
      out.emplace_back(name + ".absmax", b.absmax);
    }
    out.emplace_back(name + ".map", b.map_values);
  }
  return out;
}

int64_t LowBitState::elements_per_entry(const std::string& suffix) const {
  if (suffix.ends_with(".codes")) return 2;
  if (suffix.ends_with(".absmax")) return kBlock;
  return 0;  // ".map", ".max<d>"
}

void LowBitState::check_incoming(const std::function<const Tensor&(const std::string& suffix)>& incoming) const {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const std::string& name = buffer_names()[i];
    const Tensor& values = incoming(name + ".map");
    const bool same = values.dtype() == DType::f32 && values.numel() == 16 &&
                      std::memcmp(values.to(Device::cpu()).contiguous().data<float>(),
                                  quant::quant_map4(buffers_[i].map).data(), 16 * sizeof(float)) == 0;
    OCTET_CHECK(same, "4-bit state '", name, "': the checkpoint's map is not ", quant::quant_map_name(buffers_[i].map),
                " (a checkpoint of other state bits, or of another map)");
    std::vector<std::string> scales;
    if (buffers_[i].rank1) {
      for (size_t d = 0; d < buffers_[i].maxima.size(); ++d) scales.push_back(name + ".max" + std::to_string(d));
    } else {
      scales.push_back(name + ".absmax");
    }
    for (const std::string& key : scales) check_scales("4-bit state", key, incoming(key));
  }
}

}  // namespace octet
