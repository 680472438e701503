// optim/'s dispatch point: the functions of octet::optim::dispatch, one per entry of
// optim/kernel_signatures.inc, written by the list itself (core/kernel_dispatch.h): each runs the
// CPU's or the CUDA's version by the device of its tensors, with that device current. The update
// kernels are templates, instantiated here for every rule (OCTET_OPTIM_INSTANTIATE_KERNELS) as in
// each device's file.
#include "optim/kernels.h"

#include "core/kernel_dispatch.h"
#include "optim/cpu/kernels.h"
#include "optim/cuda/kernels.h"

namespace octet {

// sum_squares runs where its tensors are (the first decides; each device's version checks the rest).
inline const Tensor* dispatch_tensor(const std::vector<Tensor>& xs) { return xs.empty() ? nullptr : &xs.front(); }

namespace optim::dispatch {

#define OCTET_KERNEL(ret, name, params, args)                                                                        \
  ret name params {                                                                                                  \
    OCTET_DISPATCH(::octet::optim, "optim::" #name, name, kernel_device("optim::" #name, OCTET_UNPAREN args), args); \
  }
#define OCTET_DEFAULT(value)
#include "optim/kernel_signatures.inc"

OCTET_OPTIM_INSTANTIATE_KERNELS()

}  // namespace optim::dispatch
}  // namespace octet
