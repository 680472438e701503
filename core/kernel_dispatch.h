// The one dispatch pattern of octet's kernel folders (core/, quant/, optim/). Each folder writes
// its kernels once, as X-macro lines of <folder>/kernel_signatures.inc (core/kernel_list_begin.inc
// says how), and that one list is expanded four ways: the declarations of the folder's dispatch
// namespace (<folder>/kernels.h), of its cpu:: and cuda:: namespaces (<folder>/cpu/kernels.h,
// <folder>/cuda/kernels.h), and the dispatch functions of <folder>/kernels.cpp, which run cpu:: or
// cuda:: by the device of the kernel's tensors, with that device current. This header holds what
// those dispatch points share, and is the one file of the library that knows whether CUDA is built
// (with core/cuda_stub.cpp). Device-agnostic code calls the dispatch namespace only
// (tools/scripts/check_layering.sh checks it). Internal: included by the dispatch points only.
//   #define OCTET_KERNEL(ret, name, params, args) ret name params { OCTET_DISPATCH(...); }
//   #include "core/kernel_signatures.inc"   // in core/kernels.cpp: every dispatch function
#pragma once

#include "core/cuda/kernels.h"  // DeviceGuard: declarations only, defined in builds with CUDA
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

// (a, b, c) -> a, b, c: a list entry's argument list, unwrapped.
#define OCTET_UNPAREN(...) __VA_ARGS__

namespace octet {

// The tensor among a kernel's arguments that decides its device: a Tensor itself, nothing for
// other types. A folder may overload it (found by argument-dependent lookup) for a struct whose
// tensor must decide, as quant/ does for PbWeights.
template <typename T>
const Tensor* dispatch_tensor(const T&) {
  return nullptr;
}
inline const Tensor* dispatch_tensor(const Tensor& t) { return &t; }

// The device of a kernel's tensors (undefined ones are skipped); mixing devices is an error that
// names `kernel`.
template <typename... Args>
Device kernel_device(const char* kernel, const Args&... args) {
  const Tensor* first = nullptr;
  auto visit = [&](const Tensor* t) {
    if (t == nullptr || !t->defined()) return;
    if (first == nullptr) {
      first = t;
    } else if (t->device() != first->device()) {
      OCTET_FAIL(kernel, ": expected all tensors on one device, got ", first->device(), " and ", t->device(),
                 " (move them with .to(device) first)");
    }
  };
  (visit(dispatch_tensor(args)), ...);
  OCTET_CHECK(first != nullptr, kernel, ": no defined tensor");
  return first->device();
}

// The errors of a dispatch: a CUDA tensor in a build without CUDA, a kernel that has no CUDA
// version (OCTET_CPU_KERNEL), a device with no kernels at all.
[[noreturn]] void no_kernel_in_build(const char* kernel, Device d);
[[noreturn]] void no_cuda_kernel(const char* kernel, Device d);

}  // namespace octet

// The body of a dispatch function: `ns`::cuda::name with d current, or `ns`::cpu::name, with the
// arguments `args` (parenthesized); `label` names the kernel in errors.
#ifdef OCTET_WITH_CUDA
#define OCTET_DISPATCH(ns, label, name, d, args)  \
  do {                                            \
    const ::octet::Device dev_ = (d);             \
    if (dev_.is_cuda()) {                         \
      ::octet::cuda::DeviceGuard on_(dev_.index); \
      return ns::cuda::name args;                 \
    }                                             \
    return ns::cpu::name args;                    \
  } while (0)
#else
#define OCTET_DISPATCH(ns, label, name, d, args)                  \
  do {                                                            \
    const ::octet::Device dev_ = (d);                             \
    if (!dev_.is_cpu()) ::octet::no_kernel_in_build(label, dev_); \
    return ns::cpu::name args;                                    \
  } while (0)
#endif

// The body of a CPU-only kernel's dispatch function (OCTET_CPU_KERNEL).
#define OCTET_DISPATCH_CPU_ONLY(ns, label, name, d, args)     \
  do {                                                        \
    const ::octet::Device dev_ = (d);                         \
    if (!dev_.is_cpu()) ::octet::no_cuda_kernel(label, dev_); \
    return ns::cpu::name args;                                \
  } while (0)
