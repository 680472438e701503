#include "optim/optimizer.h"

#include "core/distributed.h"
#include "core/ops/elementwise.h"

#include "optim/blockwise_state.h"
#include "optim/lowbit_state.h"
#include "quant/blockwise.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <typeinfo>

#include "core/autograd.h"
#include "core/parallel.h"

namespace octet {

// ---- DenseState

DenseState::DenseState(const Tensor& param, std::vector<std::string> buffer_names)
    : ParamState(std::move(buffer_names)), numel_(param.numel()), device_(param.device()) {
  for (size_t i = 0; i < this->buffer_names().size(); ++i)
    buffers_.push_back(zeros(param.shape(), TensorOptions(param.dtype()).device(param.device())));
}

template <typename T>
void DenseState::run(const BlockUpdate<T>& fn) {
  constexpr size_t kMaxBuffers = 8;
  OCTET_CHECK(device_.is_cpu(), "DenseState: for_each_block runs on the host; a state on ", device_,
              " is updated by its device's kernels");
  OCTET_CHECK(buffers_.size() <= kMaxBuffers, "DenseState: at most ", kMaxBuffers, " buffers, got ", buffers_.size());
  std::array<T*, kMaxBuffers> base{};
  for (size_t i = 0; i < buffers_.size(); ++i) base[i] = buffers_[i].data<T>();
  // Fixed blocks spread over the threads: elementwise updates could be split anywhere, but
  // layer-wise reductions sum one partial per block and must not depend on the thread count.
  const int64_t blocks = (numel_ + kBlock - 1) / kBlock;
  parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      const int64_t begin = k * kBlock, n = std::min(kBlock, numel_ - begin);
      std::array<T*, kMaxBuffers> ptr{};
      for (size_t i = 0; i < buffers_.size(); ++i) ptr[i] = base[i] + begin;
      fn(StateBlock<T>{begin, n, ptr.data()});
    }
  });
}

void DenseState::for_each_block(const BlockUpdate<float>& fn) { run(fn); }
void DenseState::for_each_block(const BlockUpdate<double>& fn) { run(fn); }

NamedTensors DenseState::tensors() const {
  NamedTensors out;
  for (size_t i = 0; i < buffers_.size(); ++i) out.emplace_back(buffer_names()[i], buffers_[i]);
  return out;
}

// ---- Optimizer

bool name_matches(const std::string& pattern, const std::string& name) {
  // Iterative '*' glob: remember the last star and retry from one character further on mismatch.
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] != '*' && pattern[p] == name[n]) {
      ++p, ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::optional<OptionProblem> StateOptions::problem() const {
  if (auto p = range_problem()) return p;
  if (state_bits_ != 32 && state_bits_ != 8 && state_bits_ != 4)
    return OptionProblem{"state_bits", detail::str_cat("expected 32, 8 or 4, got ", state_bits_)};
  try {
    quant::check_block_size(block_size_, "block_size");
  } catch (const Error& e) {
    const std::string text = e.what();
    return OptionProblem{"block_size", text.substr(text.find(": ") + 2)};
  }
  return std::nullopt;
}

void check_options(const OptimizerOptions& o, const std::string& who) {
  if (const auto p = o.problem()) OCTET_FAIL(who, ": ", p->key, ": ", p->text);
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, const OptimizerOptions& defaults, const char* name,
                     const StateOptions& state)
    : name_(name), state_options_(state) {
  auto check_state = [&](const StateOptions& s, const std::string& what) {
    if (const auto p = s.problem()) OCTET_FAIL(what, ": ", p->key, ": ", p->text);
  };
  check_state(state, name);
  std::set<std::string> seen;
  std::set<const TensorImpl*> seen_tensors;
  for (size_t g = 0; g < groups.size(); ++g) {
    ParamGroup& pg = groups[g];
    if (pg.options) {
      const OptimizerOptions& given = *pg.options;
      OCTET_CHECK(typeid(given) == typeid(defaults), name, ": parameter group ", g,
                  " has options of another optimizer kind");
    }
    Group group;
    group.options = pg.options ? std::move(pg.options) : defaults.clone();
    check_options(*group.options, groups.size() == 1 ? std::string(name)
                                                     : std::string(name) + ": parameter group " + std::to_string(g));
    group.initial_lr = group.options->get_lr();
    if (pg.state) check_state(*pg.state, std::string(name) + ": parameter group " + std::to_string(g));
    group.state = pg.state ? *pg.state : state;
    for (auto& [pname, p] : pg.params) {
      OCTET_CHECK(p.defined(), name, ": parameter '", pname, "' is undefined");
      OCTET_CHECK(seen.insert(pname).second, name, ": parameter name '", pname, "' appears twice");
      lr_scale_[pname] = 1.0;
      group_of_[pname] = g;
      OCTET_CHECK(seen_tensors.insert(p.impl()).second, name, ": parameter '", pname,
                  "' is a tensor already listed under another name (tied weights: list it once)");
      OCTET_CHECK(p.dtype() == DType::f32 || p.dtype() == DType::f64, name, ": parameter '", pname, "' has dtype ",
                  p.dtype(), ", expected f32 or f64");
    }
    group.params = std::move(pg.params);
    groups_.push_back(std::move(group));
  }
}

const NamedTensors& Optimizer::params(size_t group) const {
  OCTET_CHECK(group < groups_.size(), name_, ": group ", group, " out of range (", groups_.size(), " groups)");
  return groups_[group].params;
}

const OptimizerOptions& Optimizer::group_options(size_t group) const {
  OCTET_CHECK(group < groups_.size(), name_, ": group ", group, " out of range (", groups_.size(), " groups)");
  return *groups_[group].options;
}
OptimizerOptions& Optimizer::group_options(size_t group) {
  OCTET_CHECK(group < groups_.size(), name_, ": group ", group, " out of range (", groups_.size(), " groups)");
  return *groups_[group].options;
}

const StateOptions& Optimizer::state_options(const std::string& param) const {
  auto it = group_of_.find(param);
  OCTET_CHECK(it != group_of_.end(), name_, ".state_options: no parameter named '", param, "'");
  return groups_[it->second].state;
}

double Optimizer::lr(size_t group) const { return group_options(group).get_lr(); }
void Optimizer::set_lr(size_t group, double lr) {
  OCTET_CHECK(lr >= 0.0, name_, ": expected lr >= 0, got ", lr);
  group_options(group).set_lr(lr);
}
double Optimizer::initial_lr(size_t group) const {
  group_options(group);  // range check
  return groups_[group].initial_lr;
}

void Optimizer::set_lr_scale(const std::string& param, double scale) {
  auto it = lr_scale_.find(param);
  OCTET_CHECK(it != lr_scale_.end(), name_, ".set_lr_scale: no parameter named '", param, "'");
  OCTET_CHECK(std::isfinite(scale) && scale >= 0.0, name_, ".set_lr_scale: expected a finite scale >= 0 for '", param,
              "', got ", scale);
  it->second = scale;
}

double Optimizer::lr_scale(const std::string& param) const {
  auto it = lr_scale_.find(param);
  OCTET_CHECK(it != lr_scale_.end(), name_, ".lr_scale: no parameter named '", param, "'");
  return it->second;
}

std::unique_ptr<ParamState> Optimizer::make_state(const std::string& name, const Tensor& param,
                                                  const OptimizerOptions& options) const {
  const StateOptions& so = state_options(name);
  // Decided on the whole parameter; sized on what this process updates (shard_state).
  const bool low_bit = so.state_bits_ != 32 && param.dtype() == DType::f32 && param.numel() >= so.min_8bit_size_ &&
                       !param.impl()->keep_32bit_state &&
                       std::none_of(so.keep_32bit_.begin(), so.keep_32bit_.end(),
                                    [&](const std::string& pat) { return name_matches(pat, name); });
  const Tensor target = shard_of(name, param);
  std::vector<std::string> names = state_buffer_names(options);
  if (!low_bit || names.empty()) return std::make_unique<DenseState>(target, std::move(names));
  if (so.state_bits_ == 4) {
    std::vector<bool> is_signed;
    for (const StateBuffer& b : state_buffers(options)) is_signed.push_back(!b.nonnegative);
    if (!shard_group_) return std::make_unique<LowBitState>(target, std::move(names), is_signed);
    // Rank-1 maxima span the whole parameter's rows and columns, which a shard cuts: the state
    // takes the whole shape, and its range.
    const auto [first, last] = shard_range(name);
    return std::make_unique<LowBitState>(
        param, std::move(names), is_signed,
        LowBitState::Shard{first, last, [this](std::vector<Tensor>& maxima) { max_over_shards(maxima); }});
  }
  const quant::QuantMap unsigned_map =
      so.nonzero_second_moment_ ? quant::QuantMap::dynamic_unsigned_nonzero : quant::QuantMap::dynamic_unsigned;
  std::vector<quant::QuantMap> maps;
  for (const StateBuffer& b : state_buffers(options))
    maps.push_back(b.is_signed ? quant::QuantMap::dynamic_signed : unsigned_map);
  return std::make_unique<BlockwiseState>(target, std::move(names), std::move(maps), so.block_size_);
}

void ParamState::check_scales(const char* kind, const std::string& key, const Tensor& scales) {
  if (scales.dtype() != DType::f32) return;
  const Tensor host = scales.to(Device::cpu()).contiguous();
  const float* v = host.data<float>();
  for (int64_t k = 0; k < host.numel(); ++k)
    OCTET_CHECK(std::isfinite(v[k]) && v[k] >= 0.0f, kind, " '", key, "': element ", k, " is ", v[k],
                " (a scale must be finite and >= 0)");
}

// ---- sharded state (ZeRO stage 1)

namespace {
// Elements per rank of a parameter of `numel` elements split over n ranks in whole blocks.
int64_t shard_chunk(int64_t numel, int64_t block, int64_t n) {
  const int64_t blocks = (numel + block - 1) / block;
  return (blocks + n - 1) / n * block;
}
}  // namespace

void Optimizer::shard_state(const dist::ProcessGroup& group) {
  OCTET_CHECK(group.size() >= 1, name_, ": shard_state: an empty process group");
  for (const Group& g : groups_) {
    OCTET_CHECK(g.states.empty(), name_, ": shard_state must come before the first step or state access");
    for (const auto& [pname, p] : g.params)
      OCTET_CHECK(p.is_contiguous(), name_, ": shard_state needs contiguous parameters; '", pname, "' is not");
  }
  shard_group_ = group.size() > 1 ? &group : nullptr;
}

int64_t Optimizer::numel_of(const std::string& name) const {
  const auto it = group_of_.find(name);
  OCTET_CHECK(it != group_of_.end(), name_, ": no parameter named '", name, "'");
  for (const auto& [pname, p] : groups_[it->second].params)
    if (pname == name) return p.numel();
  return 0;
}

std::pair<int64_t, int64_t> Optimizer::shard_range(const std::string& name) const {
  if (!shard_group_) return {0, numel_of(name)};
  return dist::part_of(numel_of(name), shard_size(name), shard_group_->rank());
}

int64_t Optimizer::shard_size(const std::string& name) const {
  const int64_t numel = numel_of(name);
  if (!shard_group_) return numel;
  // Whole blocks: ceil(blocks / N) blocks per rank, the last ranges shorter or empty. Block sizes
  // are powers of two, so the larger of the 8-bit and the 4-bit (128) one is a multiple of both.
  const StateOptions& so = state_options(name);
  const int64_t block = so.state_bits_ == 4 ? std::max(so.block_size_, LowBitState::kBlock) : so.block_size_;
  return shard_chunk(numel, block, shard_group_->size());
}

NamedTensors Optimizer::shard_grads() const {
  NamedTensors out;
  for (const Group& g : groups_)
    for (const auto& [pname, p] : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (!grad.is_contiguous()) {  // views of it must write into the gradient itself
        grad = grad.contiguous();
        Tensor(p).set_grad(grad);
      }
      out.emplace_back(pname, shard_of(pname, grad.view({-1})));
    }
  return out;
}

void Optimizer::sum_over_shards(std::span<ExactSum> sums) const {
  if (!shard_group_ || sums.empty()) return;
  const int64_t words = ExactSum::kWords, k = static_cast<int64_t>(sums.size());
  Tensor mine = empty({k, words}, TensorOptions(DType::i64));
  for (int64_t i = 0; i < k; ++i) {
    const auto w = sums[static_cast<size_t>(i)].words();
    std::copy(w.begin(), w.end(), mine.data<int64_t>() + i * words);
  }
  const Tensor all = shard_group_->all_gather(mine);  // [N, k, words]
  const int64_t* v = all.data<int64_t>();
  for (int64_t i = 0; i < k; ++i) {
    ExactSum total;
    for (int64_t r = 0; r < shard_group_->size(); ++r)
      total.merge(ExactSum::from_words({v + (r * k + i) * words, static_cast<size_t>(words)}));
    sums[static_cast<size_t>(i)] = total;
  }
}

void Optimizer::max_over_shards(std::vector<Tensor>& maxima) const {
  if (!shard_group_ || maxima.empty()) return;
  // One all-gather of every tensor end to end, then the elementwise maximum over the ranks (exact).
  std::vector<int64_t> at{0};  // where each tensor starts, end to end
  for (const Tensor& m : maxima) at.push_back(at.back() + m.numel());
  const Tensor& first = maxima.front();
  Tensor mine = empty({at.back()}, TensorOptions(first.dtype()).device(first.device()));
  for (size_t k = 0; k < maxima.size(); ++k) mine.narrow(0, at[k], maxima[k].numel()).copy_(maxima[k].reshape({-1}));
  const Tensor all = shard_group_->all_gather(mine);  // [N, total]
  Tensor top = all.select(0, 0);
  for (int64_t r = 1; r < shard_group_->size(); ++r) top = maximum(top, all.select(0, r));
  for (size_t k = 0; k < maxima.size(); ++k)
    maxima[k] = top.narrow(0, at[k], maxima[k].numel()).reshape(maxima[k].shape()).contiguous();
}

Tensor Optimizer::shard_of(const std::string& name, const Tensor& p) const {
  if (!shard_group_) return p;
  const auto [first, last] = shard_range(name);
  return p.view({-1}).narrow(0, first, last - first);
}

void Optimizer::gather_shards(const std::vector<std::pair<std::string, Tensor>>& updated) const {
  if (!shard_group_ || updated.empty()) return;
  // All-gathers of buckets of parameters: each rank's ranges, padded to the longest rank's, side by
  // side. A bucket's gathered buffer holds about kGatherBucketBytes, so the step's extra memory
  // stays bounded whatever the model's size (one bucket per parameter that is larger).
  constexpr int64_t kGatherBucketBytes = int64_t{8} << 20;
  const int64_t n = shard_group_->size(), elem = static_cast<int64_t>(dtype_size(updated.front().second.dtype()));
  size_t begin = 0;
  while (begin < updated.size()) {
    std::vector<int64_t> chunk, offset;
    int64_t total = 0;
    size_t end = begin;
    for (; end < updated.size(); ++end) {
      const auto& [pname, p] = updated[end];
      if (p.dtype() != updated[begin].second.dtype() || p.device() != updated[begin].second.device()) break;
      const int64_t c = shard_size(pname);
      if (end > begin && (total + c) * n * elem > kGatherBucketBytes) break;
      chunk.push_back(c);
      offset.push_back(total);
      total += c;
    }
    const Tensor& first = updated[begin].second;
    Tensor mine = zeros({total}, TensorOptions(first.dtype()).device(first.device()));
    for (size_t i = begin; i < end; ++i) {
      const auto [lo, hi] = shard_range(updated[i].first);
      if (hi > lo)
        mine.narrow(0, offset[i - begin], hi - lo).copy_(updated[i].second.view({-1}).narrow(0, lo, hi - lo));
    }
    const Tensor all = shard_group_->all_gather(mine);  // [N, total]
    for (size_t i = begin; i < end; ++i) {
      Tensor flat = updated[i].second.view({-1});
      for (int64_t r = 0; r < n; ++r) {
        const auto [lo, hi] = dist::part_of(flat.numel(), chunk[i - begin], r);
        if (r != shard_group_->rank() && hi > lo)
          flat.narrow(0, lo, hi - lo).copy_(all.select(0, r).narrow(0, offset[i - begin], hi - lo));
      }
      updated[i].second.storage()->bump_version();
    }
    begin = end;
  }
}

std::vector<std::string> Optimizer::state_buffer_names(const OptimizerOptions& options) const {
  std::vector<std::string> names;
  for (StateBuffer& b : state_buffers(options)) names.push_back(std::move(b.name));
  return names;
}

int64_t Optimizer::state_bytes() const {
  ensure_state();
  int64_t bytes = 0;
  for (const Group& g : groups_)
    for (const auto& st : g.states)
      for (const auto& [k, t] : st->tensors()) bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  return bytes;
}

template <typename State>
int64_t Optimizer::num_states_of() const {
  ensure_state();
  int64_t n = 0;
  for (const Group& g : groups_)
    for (const auto& st : g.states) n += dynamic_cast<const State*>(st.get()) != nullptr;
  return n;
}

int64_t Optimizer::num_8bit_params() const { return num_states_of<BlockwiseState>(); }
int64_t Optimizer::num_4bit_params() const { return num_states_of<LowBitState>(); }

void Optimizer::ensure_state() const {
  for (Group& g : groups_) {
    if (g.states.size() == g.params.size()) continue;
    g.states.clear();
    for (const auto& [pname, p] : g.params) g.states.push_back(make_state(pname, p, *g.options));
  }
}

void Optimizer::step() {
  NoGradGuard no_grad;
  ensure_state();
  std::vector<std::pair<std::string, Tensor>> updated;  // sharded: the parameters to gather
  for (Group& g : groups_) {
    for (size_t i = 0; i < g.params.size(); ++i) {
      auto& [pname, p] = g.params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      OCTET_CHECK(grad.shape() == p.shape() && grad.dtype() == p.dtype() && grad.device() == p.device(), name_,
                  ": gradient of '", pname, "' is ", grad.dtype(), " ", grad.shape(), " on ", grad.device(),
                  ", expected ", p.dtype(), " ", p.shape(), " on ", p.device());
      ParamState& state = *g.states[i];
      OCTET_CHECK(state.buffer_names() == state_buffer_names(*g.options), name_, ": the options of '", pname,
                  "' were changed after its state was made, so that it needs other state buffers");
      state.set_step(state.step() + 1);
      // A scaled parameter gets its own copy of the group's options (the update reads lr from them).
      const OptimizerOptions* options = g.options.get();
      std::unique_ptr<OptimizerOptions> scaled;
      if (const double scale = lr_scale_.at(pname); scale != 1.0) {
        scaled = g.options->clone();
        scaled->set_lr(g.options->get_lr() * scale);
        options = scaled.get();
      }
      if (shard_group_) {  // this rank's range of p, in place (p is contiguous: shard_state checked)
        const Tensor work = shard_of(pname, p);
        if (work.numel() > 0 || !elementwise() || state.collective())
          update(*options, work, shard_of(pname, grad.contiguous()), state);
        updated.emplace_back(pname, p);
        continue;
      }
      // Updates write through data pointers; a non-contiguous parameter is updated in a copy.
      Tensor work = p.contiguous();
      update(*options, work, grad.contiguous(), state);
      if (work.same(p)) {
        p.storage()->bump_version();  // autograd must see that saved copies of p went stale
      } else {
        p.copy_(work);
      }
    }
  }
  gather_shards(updated);
  ++steps_;
}

void Optimizer::zero_grad() {
  for (Group& g : groups_)
    for (auto& [pname, p] : g.params) p.set_grad(Tensor());
}

// ---- checkpoints

namespace {
constexpr const char* kStepsKey = "steps";
Tensor i64_scalar(int64_t v) { return scalar_tensor(static_cast<double>(v), DType::i64); }
}  // namespace

NamedTensors Optimizer::state_dict() const {
  ensure_state();
  NamedTensors out;
  for (const Group& g : groups_) {
    for (size_t i = 0; i < g.params.size(); ++i) {
      const auto& [pname, p] = g.params[i];
      out.emplace_back(pname + ".step", i64_scalar(g.states[i]->step()));
      for (const auto& [suffix, t] : g.states[i]->tensors())
        out.emplace_back(pname + "." + suffix, shard_group_ ? gathered(pname, p, *g.states[i], suffix, t) : t.clone());
    }
  }
  out.emplace_back(kStepsKey, i64_scalar(steps_));
  return out;
}

Tensor Optimizer::gathered(const std::string& pname, const Tensor& p, const ParamState& state,
                           const std::string& suffix, const Tensor& piece) const {
  const int64_t unit = state.elements_per_entry(suffix);
  if (unit == 0) return piece.clone();  // the same on every rank
  const int64_t n = shard_group_->size(), numel = p.numel();
  const int64_t per_rank = shard_size(pname) / unit, total = (numel + unit - 1) / unit;
  // Each rank's piece padded to per_rank, gathered, then the ranks' pieces end to end.
  Tensor mine = zeros({per_rank}, TensorOptions(piece.dtype()).device(piece.device()));
  if (piece.numel() > 0) mine.narrow(0, 0, piece.numel()).copy_(piece.reshape({-1}));
  const Tensor all = shard_group_->all_gather(mine);
  Tensor whole = empty({total}, TensorOptions(piece.dtype()).device(piece.device()));
  for (int64_t r = 0; r < n; ++r) {
    const auto [lo, hi] = dist::part_of(total, per_rank, r);
    if (hi > lo) whole.narrow(0, lo, hi - lo).copy_(all.select(0, r).narrow(0, 0, hi - lo));
  }
  // A 32-bit buffer has the parameter's shape; low-bit codes and scales are flat.
  return unit == 1 && suffix.find('.') == std::string::npos ? whole.reshape(p.shape()) : whole;
}

NamedTensors Optimizer::sliced(const NamedTensors& state) const {
  struct Piece {
    std::string pname, suffix;
    int64_t numel = 0;
    const ParamState* state = nullptr;
  };
  std::map<std::string, Piece> pieces;  // by key
  for (const Group& g : groups_)
    for (size_t i = 0; i < g.params.size(); ++i)
      for (const auto& [suffix, t] : g.states[i]->tensors()) {
        const auto& [pname, p] = g.params[i];
        pieces[pname + "." + suffix] = Piece{pname, suffix, p.numel(), g.states[i].get()};
      }
  NamedTensors out;
  for (const auto& [key, t] : state) {
    const auto it = pieces.find(key);
    if (it == pieces.end() || !t.defined()) {  // left for the strict checks
      out.emplace_back(key, t);
      continue;
    }
    const Piece& piece = it->second;
    const int64_t unit = piece.state->elements_per_entry(piece.suffix);
    if (unit == 0 || t.numel() != (piece.numel + unit - 1) / unit) {  // a wrong size is named by the checks
      out.emplace_back(key, t);
      continue;
    }
    const auto [first, last] = shard_range(piece.pname);
    // Non-empty ranges start on a block; an empty one (past the end) takes nothing.
    const int64_t lo = (first + unit - 1) / unit, hi = std::max(lo, (last + unit - 1) / unit);
    out.emplace_back(key, t.contiguous().reshape({-1}).narrow(0, lo, hi - lo));
  }
  return out;
}

void Optimizer::load_state_dict(const NamedTensors& state) {
  ensure_state();
  if (shard_group_) return load_checked(sliced(state));
  load_checked(state);
}

void Optimizer::load_checked(const NamedTensors& state) {
  // What must be there: a live tensor to copy into, or a step counter to set.
  struct Target {
    Tensor into;                    // defined for state tensors
    ParamState* counter = nullptr;  // for "<param>.step"
    bool found = false;
    const Tensor* from = nullptr;
  };
  std::map<std::string, Target> targets;
  std::vector<std::string> order;  // state_dict() order, for error messages
  auto add = [&](const std::string& key, Target t) {
    OCTET_CHECK(targets.emplace(key, std::move(t)).second, name_, ": state key '", key,
                "' is produced twice (a parameter name collides with another's state)");
    order.push_back(key);
  };
  for (Group& g : groups_) {
    for (size_t i = 0; i < g.params.size(); ++i) {
      const std::string& pname = g.params[i].first;
      add(pname + ".step", Target{Tensor(), g.states[i].get()});
      for (const auto& [suffix, t] : g.states[i]->tensors()) add(pname + "." + suffix, Target{t});
    }
  }
  add(kStepsKey, Target{});

  // Check everything before changing anything, so a bad checkpoint leaves the optimizer intact.
  for (const auto& [key, t] : state) {
    auto it = targets.find(key);
    OCTET_CHECK(it != targets.end(), name_, ".load_state_dict: unexpected key '", key, "'");
    Target& target = it->second;
    OCTET_CHECK(!target.found, name_, ".load_state_dict: key '", key, "' appears twice");
    OCTET_CHECK(t.defined(), name_, ".load_state_dict: key '", key, "' holds an undefined tensor");
    target.found = true;
    target.from = &t;
    if (target.into.defined()) {
      OCTET_CHECK(t.shape() == target.into.shape() && t.dtype() == target.into.dtype(), name_,
                  ".load_state_dict: key '", key, "' expected ", target.into.dtype(), " ", target.into.shape(),
                  ", got ", t.dtype(), " ", t.shape());
    } else {
      OCTET_CHECK(t.dtype() == DType::i64 && t.numel() == 1 && t.dim() == 0, name_, ".load_state_dict: key '", key,
                  "' expected an i64 scalar, got ", t.dtype(), " ", t.shape());
      OCTET_CHECK(t.item<int64_t>() >= 0, name_, ".load_state_dict: key '", key, "' expected a count >= 0, got ",
                  t.item<int64_t>());
    }
  }
  std::string missing;
  for (const std::string& key : order)
    if (!targets[key].found) missing += (missing.empty() ? "'" : ", '") + key + "'";
  OCTET_CHECK(missing.empty(), name_, ".load_state_dict: missing key(s) ", missing);

  for (Group& g : groups_)
    for (size_t i = 0; i < g.params.size(); ++i) {
      const std::string& pname = g.params[i].first;
      try {
        g.states[i]->check_incoming(
            [&](const std::string& suffix) -> const Tensor& { return *targets.at(pname + "." + suffix).from; });
      } catch (const Error& e) {
        OCTET_FAIL(name_, ".load_state_dict: the state of '", pname, "': ", e.what());
      }
    }

  NoGradGuard no_grad;
  for (auto& [key, target] : targets) {
    if (target.into.defined()) {
      target.into.copy_(*target.from);
    } else if (target.counter) {
      target.counter->set_step(target.from->item<int64_t>());
    } else {
      steps_ = target.from->item<int64_t>();
    }
  }
  for (Group& g : groups_)
    for (auto& st : g.states) st->loaded();
}

}  // namespace octet
