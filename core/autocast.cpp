#include "core/autocast.h"

#include <array>
#include <unordered_map>

#include "core/autograd.h"
#include "core/cpu/isa.h"
#include "core/kernels.h"
#include "core/memory_format.h"

namespace octet {

namespace {

struct CacheEntry {
  Tensor source;  // held so that its impl (the key) is not reused while the entry lives
  uint64_t version;
  Tensor cast;
};

struct State {
  DType dtype = DType::f32;
  int depth = 0;  // nested guards; the cache ends with the outermost
  std::unordered_map<const TensorImpl*, CacheEntry> cache;
};

State& state() {
  thread_local State s;
  return s;
}

struct Entry {
  std::string_view op;
  autocast::Policy policy;
};

// The policy, op by op (names as the ops record them in autograd). As torch.autocast's CPU lists:
// the products run in bf16 and write bf16; what sums many terms or exponentiates stays f32. Every
// op not listed (batch norm and layer norm, activations, adds, pools, dropout, copies) runs in
// its input's dtype: on bf16 activations it loads bf16, computes in f32 (norm statistics
// included) and writes bf16.
constexpr std::array kTable{
    // lower: bf16 inputs and weights, f32 accumulation, bf16 output
    Entry{"mm", autocast::Policy::lower},
    Entry{"bmm", autocast::Policy::lower},
    Entry{"linear", autocast::Policy::lower},
    Entry{"conv2d", autocast::Policy::lower},
    Entry{"scaled_dot_product_attention", autocast::Policy::lower},
    Entry{"lstm_layer", autocast::Policy::lower},
    // fp32: reductions, softmax, losses
    Entry{"sum", autocast::Policy::fp32},
    Entry{"mean", autocast::Policy::fp32},
    Entry{"softmax", autocast::Policy::fp32},
    Entry{"log_softmax", autocast::Policy::fp32},
    Entry{"cross_entropy", autocast::Policy::fp32},
    Entry{"nll_loss", autocast::Policy::fp32},
    Entry{"mse_loss", autocast::Policy::fp32},
};

}  // namespace

AutocastGuard::AutocastGuard(DType dtype) : previous_(state().dtype) {
  OCTET_CHECK(dtype == DType::bf16 || dtype == DType::f32, "AutocastGuard: expected bf16 (on) or f32 (off), got ",
              dtype);
  State& s = state();
  s.dtype = dtype;
  ++s.depth;
}

AutocastGuard::~AutocastGuard() {
  State& s = state();
  s.dtype = previous_;
  if (--s.depth == 0) s.cache.clear();
}

namespace autocast {

Policy policy(std::string_view op) {
  for (const Entry& e : kTable)
    if (e.op == op) return e.policy;
  return Policy::keep;
}

std::string_view policy_name(Policy p) {
  switch (p) {
    case Policy::lower:
      return "lower";
    case Policy::fp32:
      return "fp32";
    case Policy::keep:
      return "keep";
  }
  return "unknown";
}

bool lowers(std::string_view op, const Tensor& x) { return x.defined() && compute_dtype(op, x.dtype()) == DType::bf16; }

bool lowers(std::string_view op, std::initializer_list<Tensor> operands) {
  bool any = false;
  for (const Tensor& t : operands) {
    if (!t.defined()) continue;
    if (t.dtype() != DType::f32 && t.dtype() != DType::bf16) return false;
    any = any || lowers(op, t);
  }
  return any;
}

bool widens(std::string_view op, const Tensor& x) {
  return x.defined() && x.dtype() == DType::bf16 && policy(op) == Policy::fp32;
}

DType output_dtype(const Device&) { return DType::bf16; }

DType dtype() { return state().dtype; }
bool enabled() { return state().dtype != DType::f32; }

DType compute_dtype(std::string_view op, DType input) {
  if (!enabled() || input == DType::f64 || !is_floating(input)) return input;
  switch (policy(op)) {
    case Policy::lower:
      return dtype();
    case Policy::fp32:
      return DType::f32;
    case Policy::keep:
      break;
  }
  return input;
}

Tensor cast(const Tensor& x, DType dtype) {
  if (!x.defined() || x.dtype() == dtype) return x.defined() ? x.detach() : x;
  NoGradGuard no_grad;
  State& s = state();
  const bool weight = s.depth > 0 && x.requires_grad() && x.is_leaf();
  if (weight) {
    auto it = s.cache.find(x.impl());
    if (it != s.cache.end() && it->second.version == x.storage()->version() && it->second.cast.dtype() == dtype)
      return it->second.cast;
  }
  Tensor out = empty_in_format_of(x, x.shape(), TensorOptions(dtype).device(x.device()));  // keeps channels-last
  kernels::copy(out, x);
  if (weight) s.cache[x.impl()] = CacheEntry{x, x.storage()->version(), out};
  return out;
}

bool native_on_cpu() { return cpu::bf16_selector().active() == cpu::Bf16Path::native; }

std::string describe(DType precision, Device device) {
  if (precision != DType::bf16) return std::string(dtype_name(precision));
  if (device.is_cuda())
    return "bf16 (CUDA: matmuls, linear layers, convolutions and the products of attention and the LSTM gates on "
           "bf16 tensor cores (cuBLAS, cuDNN) with f32 sums; bf16 activations between them)";
  if (native_on_cpu()) return "bf16 (native on this CPU: AVX512-BF16)";
  return cpu::bf16_native_supported()
             ? "bf16 (emulated, as OCTET_BF16=emulated asks: the same numbers, not faster)"
             : "bf16 (emulated: this CPU has no AVX512-BF16 or AMX, so bf16 ops round their inputs and compute in "
               "f32; the same numbers, not faster)";
}

}  // namespace autocast
}  // namespace octet
