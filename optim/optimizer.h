// Optimizer: the base of SGD, Adam, AdamW, RMSprop, Lion, LAMB and LARS. Parameters come in
// groups of NAMED tensors; each group holds its own copy of the options (per-group lr /
// weight_decay, as PyTorch param groups).
// Optimizer state is keyed by parameter name, never by pointer or position, so a checkpoint
// survives reordering parameters and rebuilding the model.
//   SGD opt(model.named_parameters(), SGDOptions(0.1).momentum(0.9));
//   loss.backward();  opt.step();  opt.zero_grad();
//   save(opt.state_dict());  ...  fresh.load_state_dict(loaded);   // continues bit for bit
//
// Extension point (pluggable state, e.g. 8-bit block-quantized moments):
//   Each parameter owns one ParamState, made by the virtual Optimizer::make_state() the first time
//   state is needed. An update never touches state memory directly: it asks the ParamState to
//   run it block by block (ParamState::for_each_block) and gets each named buffer of the block as
//   a dense array of the parameter's type. DenseState hands out its own memory; a block-quantized
//   state (codes u8 + absmax f32 per block of, say, 256 elements) would dequantize a block into
//   scratch, run the same update on it, and quantize it back -- the paper's "dequantize, update in
//   32-bit, quantize" -- without any change to SGD's or Adam's update code. ParamState::tensors()
//   names what a checkpoint stores ("exp_avg" for dense; "exp_avg.codes", "exp_avg.absmax" for
//   quantized), and load_state_dict() checks and copies into exactly those tensors. An 8-bit Adam
//   is then a subclass overriding make_state() (keeping small or embedding parameters dense).
//
// Layer-wise updates (LAMB, LARS; see optim/cpu/layerwise.h) scale a parameter's whole update by a
// ratio of norms, so they run in two passes: a reduction over blocks, then the update. LAMB's
// first pass needs the state (||update|| depends on the new moments) but must not change it, so
// it uses ParamState::read_blocks(): the same blocks, read-only (a quantized state dequantizes
// and does not quantize back). The second pass recomputes the new moments from the same old state
// and writes them, so the norm is exactly that of the update applied. A state's blocks are fixed
// by the state, never by the thread count, so these reductions are reproducible.
//
// Devices. An optimizer's per-element math is ONE rule (optim/update_rules.h): a struct of
// per-step scalars with an OCTET_HD operator()(p, g, s) that moves one element and its state
// values, compiled for the host and for CUDA. update() builds the rule and hands it to
// run_rule() (optim/kernels.h), which routes by the parameter's device through optim/'s one kernel
// list and dispatch point (optim/kernel_signatures.inc, optim/kernels.cpp):
//   - CPU: through for_each_block as above, so any ParamState (dense, 8-bit, custom) works;
//   - CUDA: a kernel cannot take a std::function, so it needs the state's memory instead:
//     optim/cuda/device_update.cpp finds it in the three state kinds whose layout the kernels know --
//     DenseState (buffers of the parameter's type), BlockwiseState (u8 codes + f32 absmax,
//     updated by a fused kernel, one thread block per quantization block) and LowBitState (4-bit
//     codes, one warp per block of 128) -- and launches optim/cuda/ on
//     the current stream; other ParamState kinds are CPU-only (an Error).
// State tensors are made on the parameter's device (make_state), so checkpoints hold device
// tensors and load_state_dict copies across devices. Layer-wise rules take their factor through
// set_scale(): on the CPU from the host; on CUDA their norms are reduced on the GPU in a fixed
// order (deterministic) and the factor stays in device memory for the update kernel, so a step
// never waits for the GPU. The kernels use no FMA contraction: with the same rule they round as
// the CPU does, and only the order of the layer-wise sums differs.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/exact_sum.h"
#include "core/options.h"
#include "core/tensor.h"

namespace octet::dist {
class ProcessGroup;
}

namespace octet {

// ---- per-parameter state

// A block of one parameter handed to an update: elements [begin, begin + n) of the flattened
// parameter, and each state buffer of the block as n dense elements of T (in the order of
// ParamState::buffer_names()).
template <typename T>
struct StateBlock {
  int64_t begin = 0;
  int64_t n = 0;
  T* const* buffers = nullptr;
  T* buffer(size_t i) const { return buffers[i]; }
};

template <typename T>
using BlockUpdate = std::function<void(const StateBlock<T>&)>;
// A read-only pass sees the buffers as const.
template <typename T>
using BlockRead = std::function<void(const StateBlock<const T>&)>;

// A state buffer as an optimizer declares it (Optimizer::state_buffers): its name ("exp_avg", the
// suffix of its checkpoint keys), whether 8-bit state stores it with the signed map
// (quant::QuantMap::dynamic_signed) or, for a buffer that is never negative, the unsigned one,
// which spends the sign bit on precision; and whether it is never negative (a second moment, which
// 4-bit state stores with the linear map without 0, rank-1 normalized). The two differ for
// RMSprop's square_avg, which 8-bit state keeps signed as bitsandbytes does.
struct StateBuffer {
  std::string name;
  bool is_signed = true;
  bool nonnegative = false;
};
inline StateBuffer signed_buffer(std::string name) { return {std::move(name), true, false}; }
inline StateBuffer unsigned_buffer(std::string name) { return {std::move(name), false, true}; }

// One parameter's optimizer state: a count of the updates applied to it and named buffers of the
// parameter's size, all starting at zero.
class ParamState {
 public:
  explicit ParamState(std::vector<std::string> buffer_names) : buffer_names_(std::move(buffer_names)) {}
  virtual ~ParamState() = default;
  ParamState(const ParamState&) = delete;
  ParamState& operator=(const ParamState&) = delete;

  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }
  const std::vector<std::string>& buffer_names() const { return buffer_names_; }

  // Runs `fn` over every element of the parameter, block by block, possibly in parallel: `fn` may
  // touch only its own block. T is the parameter's type (f32 -> float, f64 -> double). The blocks
  // (their begin and n) are a property of the state: the same on every call and thread count.
  // Host code: a state on a CUDA device is updated by its kernels instead (an Error here).
  virtual void for_each_block(const BlockUpdate<float>& fn) = 0;
  virtual void for_each_block(const BlockUpdate<double>& fn) = 0;
  // The same blocks, read-only: the first pass of a layer-wise update. The default runs
  // for_each_block (nothing is written, so a dense state is unchanged); a state that re-encodes
  // its blocks after an update (quantized) overrides it to skip that.
  virtual void read_blocks(const BlockRead<float>& fn) { read_through_update(fn); }
  virtual void read_blocks(const BlockRead<double>& fn) { read_through_update(fn); }
  // What a checkpoint stores, keyed by suffix (without the parameter name): handles to the live
  // tensors, so loading is a checked copy into them.
  virtual NamedTensors tensors() const = 0;
  // Before a checkpoint is copied into tensors(): an Error when its values cannot be this state's
  // (`incoming` gives the checkpoint's tensor for a suffix).
  virtual void check_incoming(const std::function<const Tensor&(const std::string& suffix)>& incoming) const {}
  // After the copy: a state derives what it keeps from its tensors.
  virtual void loaded() {}
  // Sharded state (Optimizer::shard_state): how many of the parameter's flattened elements one
  // entry of tensor `suffix` covers -- 1 for a buffer of the parameter's size, the block size for a
  // scale per block, 2 for 4-bit codes packed two per byte -- or 0 for a tensor every rank holds
  // whole (a code table; rank-1 maxima, the same on every rank). A checkpoint puts the ranks' pieces
  // end to end by it, and cuts a whole tensor into this rank's piece.
  virtual int64_t elements_per_entry(const std::string& suffix) const { return 1; }
  // Whether an update of this state takes part in a collective of the shard group (4-bit rank-1
  // maxima): a sharded step then runs it on every rank, also where this rank's range is empty.
  virtual bool collective() const { return false; }

 protected:
  // For check_incoming: a quantized state's scales (maxima of |x|) must be finite and >= 0 (a
  // corrupt one would decode to NaN or flip signs); an Error naming `key` otherwise. `kind`: "8-bit
  // state", "4-bit state". A tensor of another dtype is left to the loader, which names it.
  static void check_scales(const char* kind, const std::string& key, const Tensor& scales);

 private:
  template <typename T>
  void read_through_update(const BlockRead<T>& fn) {
    for_each_block(BlockUpdate<T>([&](const StateBlock<T>& b) { fn(StateBlock<const T>{b.begin, b.n, b.buffers}); }));
  }
  std::vector<std::string> buffer_names_;
  int64_t step_ = 0;
};

// State buffers as plain tensors of the parameter's shape and dtype (contiguous), handed out in
// blocks of kBlock elements (the last one shorter).
class DenseState : public ParamState {
 public:
  static constexpr int64_t kBlock = int64_t{1} << 15;
  DenseState(const Tensor& param, std::vector<std::string> buffer_names);
  void for_each_block(const BlockUpdate<float>& fn) override;
  void for_each_block(const BlockUpdate<double>& fn) override;
  NamedTensors tensors() const override;
  const Tensor& buffer(size_t i) const { return buffers_.at(i); }

 private:
  template <typename T>
  void run(const BlockUpdate<T>& fn);
  std::vector<Tensor> buffers_;
  int64_t numel_;
  Device device_;
};

// ---- state precision

// How state is stored: 32-bit (dense, the parameter's dtype), 8-bit (block-wise quantized codes
// and absmax, optim/blockwise_state.h) or 4-bit (two codes per byte, block-wise first moments and
// rank-1 second moments, optim/lowbit_state.h; its CUDA kernels have not run on a GPU yet). Only
// f32 parameters with at least min_8bit_size elements get low-bit state; names matching a
// keep_32bit pattern ('*' matches any run of characters, e.g. "*embedding*") keep 32-bit state,
// and so do parameters their layer marked with
// Module::mark_keep_32bit_state (StableEmbedding's weight), whatever the patterns. Switching bits
// changes nothing else: same options, formulas and state names (low-bit buffers are saved as
// "<buffer>.codes", "<buffer>.absmax", ...).
//   Adam opt(model.named_parameters(), AdamOptions(1e-3), StateOptions().state_bits(8));
// block_size (8-bit only; 4-bit blocks are 128 as in the paper): 256 as in the reference
// implementation (bitsandbytes allocates every 8-bit state in
// blocks of 256; the paper says 2048). Smaller blocks cost 4 bytes of absmax per block and buffer
// (1.6% of the state at 256, 0.2% at 2048) and mix fewer elements of different gradient frequency
// in one block: at 2048 a rarely updated embedding row shares its block with frequent ones.
// nonzero_second_moment: second moments use QuantMap::dynamic_unsigned_nonzero (a positive value
// never quantizes to 0, quant/maps.h), which keeps a rare element's update bounded at any block
// size; false gives the reference's rule (plain nearest code, dynamic_unsigned).
#define OCTET_STATE_OPTIONS(X)                                                                      \
  X(int64_t, state_bits, 32, kAnyValue,                                                             \
    "optimizer state precision: 32, 8 (block-wise quantized) or 4 (4-bit, rank-1 second moments)")  \
  X(int64_t, min_8bit_size, 4096, kNonNegative, "parameters with fewer elements keep 32-bit state") \
  X(int64_t, block_size, 256, kAnyValue,                                                            \
    "8-bit state block size (a power of two, 64..4096; 4 bytes of absmax per block and buffer)")    \
  X(bool, nonzero_second_moment, true, kAnyValue,                                                   \
    "8-bit state: a positive second moment never quantizes to 0 (false: the bitsandbytes rule)")    \
  X(std::vector<std::string>, keep_32bit, {}, kAnyValue,                                            \
    "parameter name patterns (* matches anything) whose state stays 32-bit, e.g. [\"*embedding*\"]")
struct StateOptions {
  OCTET_OPTIONS(StateOptions, OCTET_STATE_OPTIONS)
  // Beyond the ranges: state_bits 32, 8 or 4, and a block size that is a power of two in 64..4096
  // (checked with 32-bit state too, so that switching to 8 bits later finds no surprise).
  std::optional<OptionProblem> problem() const;
};

// Glob match with '*' only (for StateOptions::keep_32bit).
bool name_matches(const std::string& pattern, const std::string& name);

// ---- options and groups

// Options of one optimizer kind (SGDOptions, AdamOptions, ...). The lr accessors are virtual so
// the base class and the schedules can read and set it without knowing the kind.
struct OptimizerOptions {
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  // The declared options (core/options.h) with their values, ranges and documentation.
  virtual std::vector<OptionInfo> fields() const = 0;
  // Sets option `key` (false: this kind has no such option).
  virtual bool set(const std::string& key, const OptionValue& value) = 0;
  // The first option out of its declared range, else the first rule between options that is broken
  // (SGD: nesterov needs momentum); none when the options are valid. The optimizer's constructor
  // and a recipe's builder both ask.
  virtual std::optional<OptionProblem> problem() const = 0;
  // A kind's rules between its options (none by default); OCTET_OPTIMIZER_OPTIONS's problem() asks.
  std::optional<OptionProblem> rule_problem() const { return std::nullopt; }
};

// An Error "who: key: what is wrong" for the first problem() of `o`.
void check_options(const OptimizerOptions& o, const std::string& who);

// An optimizer's options struct from its option list (core/options.h): members, setters, and the
// OptimizerOptions interface. The struct may define rule_problem() for rules between its options.
#define OCTET_OPTIMIZER_OPTIONS(SelfType, LIST)                                                                   \
  OCTET_OPTIONS(SelfType, LIST)                                                                                   \
  std::unique_ptr<::octet::OptimizerOptions> clone() const override { return std::make_unique<SelfType>(*this); } \
  double get_lr() const override { return lr_; }                                                                  \
  void set_lr(double v) override { lr_ = v; }                                                                     \
  std::vector<::octet::OptionInfo> fields() const override { return option_table(); }                             \
  bool set(const std::string& key, const ::octet::OptionValue& value) override { return set_option(key, value); } \
  std::optional<::octet::OptionProblem> problem() const override {                                                \
    if (auto p = range_problem()) return p;                                                                       \
    return rule_problem();                                                                                        \
  }

// Parameters that share options. Without options the group takes the optimizer's defaults; without
// state options, the optimizer's StateOptions (a group may keep 32-bit state in an 8-bit optimizer,
// or the reverse, as bitsandbytes' per-parameter overrides do).
//   ParamGroup(embedding_params).state_options(StateOptions().state_bits(32))
struct ParamGroup {
  NamedTensors params;
  std::unique_ptr<OptimizerOptions> options;  // may be null
  std::optional<StateOptions> state;          // unset: the optimizer's

  explicit ParamGroup(NamedTensors p) : params(std::move(p)) {}
  ParamGroup(NamedTensors p, const OptimizerOptions& o) : params(std::move(p)), options(o.clone()) {}
  ParamGroup(const ParamGroup& o)
      : params(o.params), options(o.options ? o.options->clone() : nullptr), state(o.state) {}
  ParamGroup(ParamGroup&&) = default;
  ParamGroup& operator=(ParamGroup o) {
    params = std::move(o.params);
    options = std::move(o.options);
    state = std::move(o.state);
    return *this;
  }
  ParamGroup& state_options(StateOptions s) {
    state = std::move(s);
    return *this;
  }
};

// ---- the optimizer

// The two sums of a layer-wise optimizer's first pass (LAMB: ||p||^2, ||u||^2; LARS: ||p||^2, ||g||^2).
using LayerSums = std::array<ExactSum, 2>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient, in place, under NoGradGuard; parameters whose
  // grad is undefined are skipped (their step counters do not advance).
  virtual void step();
  // Sets every parameter's grad to undefined.
  void zero_grad();

  size_t num_groups() const { return groups_.size(); }
  const NamedTensors& params(size_t group) const;
  double lr(size_t group) const;
  void set_lr(size_t group, double lr);
  // The lr the group was built with: schedules scale this one.
  double initial_lr(size_t group) const;
  // A factor on one parameter's lr (1 unless set): step() updates parameter `name` with a clone of
  // its group's options whose lr is lr * scale, so the factor works the same for every optimizer,
  // 32- or 8-bit state, on the CPU and on CUDA, and follows the group's schedule. DCLR
  // (quant/int8.h) sets it per INT8 layer before each step. It is not part of state_dict(): whoever
  // sets it sets it again after a resume. An unknown name, or a negative or non-finite scale, is an
  // Error.
  //   opt.set_lr_scale("features.3.weight", quant::dclr_scale(d_c, 20.0, 0.1));
  void set_lr_scale(const std::string& name, double scale);
  double lr_scale(const std::string& name) const;
  // Calls of step() so far (also restored by load_state_dict).
  int64_t steps() const { return steps_; }
  // The optimizer's state options, and those of the group holding parameter `param` (its own, or
  // the optimizer's); an unknown name is an Error.
  const StateOptions& state_options() const { return state_options_; }
  const StateOptions& state_options(const std::string& param) const;
  // Bytes of optimizer state (every state tensor; creates the state if it does not exist yet).
  int64_t state_bytes() const;
  // Parameters whose state is 8-bit, 4-bit.
  int64_t num_8bit_params() const;
  int64_t num_4bit_params() const;

  // A snapshot (cloned tensors) of the state: "<param>.<buffer>" for each state tensor (e.g.
  // "fc.weight.exp_avg"), "<param>.step" (i64 scalar: updates applied to that parameter) and
  // "steps" (i64 scalar: steps()). Hyperparameters are not included: they come from the recipe.
  NamedTensors state_dict() const;
  // Strict: every key above must be present exactly once with the same shape and dtype, and no
  // other key; otherwise an octet::Error naming the key, and nothing is changed.
  void load_state_dict(const NamedTensors& state);

  // ZeRO stage 1 (as PyTorch's ZeroRedundancyOptimizer and DeepSpeed's stage 1): from now on this
  // process keeps, and updates, the state of its shard of every parameter only, 1/N of the state
  // for N processes in `group`. Each parameter is split, flattened, into N ranges whose bounds fall
  // on its 8-bit block size, or on a multiple of 128 with 4-bit state (an absmax block never
  // straddles two ranks; the last ranges may be shorter or empty); whether a parameter's state is
  // low-bit, and whether 4-bit second moments are rank-1, is decided on the whole parameter. A
  // rank-1 buffer's row and column maxima span the shards: each rank takes them over its range and
  // they are max-reduced over the ranks before the codes are written, so every rank holds the
  // whole parameter's maxima.
  // step() reads this rank's range of each (averaged) gradient -- the whole gradient from
  // DistributedDataParallel, or only this range when it reduce-scatters (shard_gradients) --,
  // updates that range, and all-gathers the updated ranges, so every rank ends with the same
  // weights, bit for bit those an unsharded optimizer gives: the updates are elementwise, or
  // block-wise on whole blocks, rank-1 maxima are exact maxima over the ranks, and LAMB's and
  // LARS's whole-parameter norms are exact sums (ExactSum) of the ranks' pieces (sum_over_shards).
  // Call before the first step, with contiguous parameters; every rank calls step() together. A
  // group of one process changes nothing.
  // state_dict() gathers the ranks' pieces into what the unsharded optimizer would hold (every rank
  // calls it together and gets the whole), and load_state_dict() takes that and keeps this rank's
  // pieces: a checkpoint loads at any process count, sharded or not.
  //   opt.shard_state(dist::ProcessGroup::world());
  void shard_state(const dist::ProcessGroup& group);
  bool sharded() const { return shard_group_ != nullptr; }
  // The flattened elements [first, second) of parameter `name` this process updates (all of
  // them when not sharded).
  std::pair<int64_t, int64_t> shard_range(const std::string& name) const;
  // Elements per rank of parameter `name`: rank r holds [r c, (r + 1) c), cut at its size (the
  // whole size when not sharded).
  int64_t shard_size(const std::string& name) const;
  // This rank's range of every gradient that is defined (the whole gradients when not sharded),
  // as flat views, by parameter name: clip_grad_norm(const Optimizer&, ...) reads and scales them.
  NamedTensors shard_grads() const;
  // Sums taken over this rank's ranges, added over the ranks (every rank calls it together, in
  // the same order), so each holds the whole parameters' sum; nothing to add when not sharded.
  void sum_over_shards(std::span<ExactSum> sums) const;

 protected:
  // `defaults` fills groups without options; group options of the wrong kind are an Error.
  Optimizer(std::vector<ParamGroup> groups, const OptimizerOptions& defaults, const char* name,
            const StateOptions& state = {});

  // The extension point: the state of parameter `name` in a group with `options`. The default
  // is DenseState with state_buffers(options), or BlockwiseState when state_options(name) asks
  // for 8 bits and the parameter qualifies. Called lazily (first step/state_dict/load).
  virtual std::unique_ptr<ParamState> make_state(const std::string& name, const Tensor& param,
                                                 const OptimizerOptions& options) const;
  // The state buffers a parameter needs under `options` (e.g. {signed_buffer("momentum_buffer")}).
  virtual std::vector<StateBuffer> state_buffers(const OptimizerOptions& options) const = 0;
  // Their names, in the same order: a ParamState's buffer_names().
  std::vector<std::string> state_buffer_names(const OptimizerOptions& options) const;
  // Applies one update to `param` (contiguous f32/f64, on the CPU or a CUDA device) with `grad`
  // (same shape, dtype, device, contiguous); state.step() already counts this update. The
  // built-in optimizers build their rule and call run_rule() (optim/kernels.h).
  virtual void update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
                      ParamState& state) const = 0;

  const OptimizerOptions& group_options(size_t group) const;
  OptimizerOptions& group_options(size_t group);
  const char* name() const { return name_; }
  // Whether update() reads nothing but each element and its own state (false for LAMB and LARS,
  // which take whole-parameter norms): a sharded step then skips a parameter whose range on this
  // rank is empty, where a layer-wise optimizer still takes part in sum_over_shards.
  virtual bool elementwise() const { return true; }

 private:
  struct Group {
    NamedTensors params;
    std::unique_ptr<OptimizerOptions> options;
    double initial_lr = 0.0;
    StateOptions state;
    std::vector<std::unique_ptr<ParamState>> states;  // one per param, made by ensure_state()
  };
  void ensure_state() const;
  // Parameters whose state is a State (creates the state if it does not exist yet).
  template <typename State>
  int64_t num_states_of() const;
  int64_t numel_of(const std::string& name) const;  // an unknown name is an Error
  // The parameter as its state and update see it: p, or this rank's flat range of it when sharded.
  Tensor shard_of(const std::string& name, const Tensor& p) const;
  // Each tensor replaced with its elementwise maximum over the shard group's ranks (every rank
  // calls it together): 4-bit rank-1 maxima (LowBitState::Shard).
  void max_over_shards(std::vector<Tensor>& maxima) const;
  // After the updates of a sharded step: every rank's ranges to every rank.
  void gather_shards(const std::vector<std::pair<std::string, Tensor>>& updated) const;
  // Sharded checkpoints: state tensor `suffix` of parameter `pname` put together from every rank's
  // piece, and a whole state_dict cut down to this rank's pieces.
  Tensor gathered(const std::string& pname, const Tensor& p, const ParamState& state, const std::string& suffix,
                  const Tensor& piece) const;
  NamedTensors sliced(const NamedTensors& state) const;
  // load_state_dict's checks and copies, on state shaped as this process holds it.
  void load_checked(const NamedTensors& state);

  const char* name_;
  StateOptions state_options_;
  mutable std::vector<Group> groups_;       // states are created lazily, also from const accessors
  std::map<std::string, double> lr_scale_;  // every parameter's name -> its lr factor
  std::map<std::string, size_t> group_of_;  // every parameter's name -> its group
  int64_t steps_ = 0;
  const dist::ProcessGroup* shard_group_ = nullptr;
};

}  // namespace octet
