// bf16 mixed precision, as torch.autocast defines it. Inside an AutocastGuard(DType::bf16):
//   - the ops of the "lower" list (convolutions, matmuls and linear layers, attention, LSTM gates)
//     compute in bf16: their f32 inputs and weights are rounded to bf16 (round to nearest even),
//     the products accumulate in f32 and the output is rounded once to bf16 (on CUDA a
//     convolution's bias is added after cuDNN's rounding and rounded again). Their backward runs
//     the same way;
//   - the ops of the "fp32" list (reductions, softmax and log-softmax, losses) compute in f32,
//     casting a bf16 input up;
//   - every other op runs in its inputs' dtype: on bf16 activations, batch norm, layer norm,
//     activations, adds, pools and dropout load bf16, compute in f32 (norm statistics included)
//     and write bf16, so the activations between the products, and what the backward keeps of
//     them, take half FP32's bytes. bf16 with f32 (a residual stream) gives f32.
// Weights, their gradients and the optimizer state stay f32 (the master copies): a gradient has
// its input's dtype (the autograd engine casts it). A tensor that requires grad and has no history
// (a weight) is cast once per outermost guard, then reused by every op that reads it. The table of
// ops and policies lives in one place (core/autocast.cpp); ops ask it at their entry.
//   {
//     AutocastGuard autocast(DType::bf16);   // the trainer holds one around each step's forward
//     Tensor loss = cross_entropy(model.forward(x), y);
//   }
//   loss.backward();                         // runs as the forward decided: bf16 where it was
// Where the CPU has no native bf16 arithmetic (AVX512-BF16 or AMX; AVX2-only CPUs), the lower ops
// round their inputs to bf16 and compute in f32: the same numbers (up to summation order), not
// faster. autocast::describe() says which.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/tensor.h"

namespace octet {

class AutocastGuard {
 public:
  // Autocast to `dtype` (bf16; f32 turns it off for the scope) while the guard lives; nests.
  explicit AutocastGuard(DType dtype = DType::bf16);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DType previous_;
};

namespace autocast {

enum class Policy : uint8_t { lower, fp32, keep };

// The precision policy's table: an op's policy (keep for an op the table does not list).
Policy policy(std::string_view op);
std::string_view policy_name(Policy p);

// bf16 while an AutocastGuard(bf16) is active on this thread, else f32 (off).
DType dtype();
bool enabled();

// The dtype `op` computes in now, for inputs of dtype `input`: bf16 for a lower op on f32 input
// under autocast, f32 for an fp32 op on bf16 input, else `input`. f64 is never lowered (gradient
// checks stay exact).
DType compute_dtype(std::string_view op, DType input);

// Whether `op` (a lower op) computes in bf16 now for input x: compute_dtype(op, x) is bf16.
//   if (autocast::lowers("mm", a)) ...   // the bf16 path
bool lowers(std::string_view op, const Tensor& x);
// Whether `op` computes in bf16 now on these operands (undefined ones skipped): every one f32 or
// bf16, and autocast on or one of them bf16 already (autocast's activations, in a backward or
// outside the guard). The products ask it with their operands: mm, bmm, linear, conv2d, attention.
//   if (autocast::lowers("conv2d", {x, w})) ...   // cast both to bf16, write output_dtype()
bool lowers(std::string_view op, std::initializer_list<Tensor> operands);

// Whether `op` (an fp32 op) takes its bf16 input x up to f32, inside a guard or not (a backward's
// sum of a bf16 gradient): the op then runs on x.to(f32), differentiable, so x's gradient comes
// back as bf16.
//   if (autocast::widens("softmax", x)) return softmax(x.to(DType::f32), dim);
bool widens(std::string_view op, const Tensor& x);

// The dtype a lower op writes on `device`: bf16 on the CPU and on CUDA (whose elementwise, batch
// norm and pooling kernels take bf16 activations as the CPU's do).
DType output_dtype(const Device& device);

// x as dtype, without autograd history (the op that calls it records its own node against x). A
// weight (requires grad, no history) is cast once per outermost guard and cached.
Tensor cast(const Tensor& x, DType dtype);

// Whether this CPU computes the lower ops natively in bf16 (cpu::bf16_selector()), and a line for
// the log on `device`: "bf16 (native on this CPU: AVX512-BF16)", "bf16 (emulated: ...)", or on a
// GPU what runs in bf16 there.
bool native_on_cpu();
std::string describe(DType precision, Device device = Device::cpu());

}  // namespace autocast
}  // namespace octet
