// Device dispatch for core/kernels.h: each kernel checks that its tensors share one device and
// calls that device's implementation (core/cpu/, or core/cuda/ in builds with OCTET_CUDA).
#include "core/kernels.h"

#include <initializer_list>

#include "core/cpu/kernels.h"
#include "core/cuda.h"
#ifdef OCTET_WITH_CUDA
#include "core/cuda/kernels.h"
#endif

namespace octet::kernels {
namespace {

// The device of the kernel's tensors (undefined ones are skipped); mixing devices is an error.
Device device_of(const char* kernel, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (first == nullptr) {
      first = t;
    } else if (t->device() != first->device()) {
      OCTET_FAIL(kernel, ": expected all tensors on one device, got ", first->device(), " and ", t->device(),
                 " (move them with .to(device) first)");
    }
  }
  OCTET_CHECK(first != nullptr, kernel, ": no defined tensor");
  return first->device();
}

}  // namespace

// Calls cpu::kernel or cuda::kernel with the arguments, by the device `d`.
#ifdef OCTET_WITH_CUDA
#define OCTET_DISPATCH(kernel, d, ...)  \
  do {                                  \
    if ((d).is_cuda()) {                \
      cuda::DeviceGuard on((d).index);  \
      return cuda::kernel(__VA_ARGS__); \
    }                                   \
    return cpu::kernel(__VA_ARGS__);    \
  } while (0)
#else
#define OCTET_DISPATCH(kernel, d, ...)                                                   \
  do {                                                                                   \
    OCTET_CHECK((d).is_cpu(), #kernel ": no kernel for device ", (d), " in this build"); \
    return cpu::kernel(__VA_ARGS__);                                                     \
  } while (0)
#endif

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.device() != src.device()) {
    // Across devices: move src as it is (contiguous, its own dtype) to dst's device, then the
    // same-device copy does broadcasting, dtype conversion and dst's strides.
    Tensor moved = empty(src.shape(), TensorOptions(src.dtype()).device(dst.device()));
    cuda::copy_between_devices(moved, src.contiguous(), false);
    return copy(dst, moved);
  }
  const Device d = device_of("copy", {&dst, &src});
  OCTET_DISPATCH(copy, d, dst, src);
}

void fill(const Tensor& dst, double value) {
  const Device d = device_of("fill", {&dst});
  OCTET_DISPATCH(fill, d, dst, value);
}

void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset) {
  const Device d = device_of("uniform", {&dst});
  OCTET_DISPATCH(uniform, d, dst, low, high, seed, offset);
}

void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  const Device d = device_of("normal", {&dst});
  OCTET_DISPATCH(normal, d, dst, mean, std, seed, offset);
}

void unary(UnaryOp op, const Tensor& x, const Tensor& out, double a, double b) {
  const Device d = device_of("unary", {&x, &out});
  OCTET_DISPATCH(unary, d, op, x, out, a, b);
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const Device d = device_of("binary", {&a, &b, &out});
  OCTET_DISPATCH(binary, d, op, a, b, out);
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const Device d = device_of("compare", {&a, &b, &out});
  OCTET_DISPATCH(compare, d, op, a, b, out);
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const Device d = device_of("where", {&cond, &a, &b, &out});
  OCTET_DISPATCH(where, d, cond, a, b, out);
}

void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out) {
  const Device d = device_of("reduce_rows", {&x, &out});
  OCTET_DISPATCH(reduce_rows, d, op, x, out);
}

void arg_reduce_rows(bool is_max, const Tensor& x, const Tensor& out) {
  const Device d = device_of("arg_reduce_rows", {&x, &out});
  OCTET_DISPATCH(arg_reduce_rows, d, is_max, x, out);
}

void softmax_rows(bool log, const Tensor& x, const Tensor& out) {
  const Device d = device_of("softmax_rows", {&x, &out});
  OCTET_DISPATCH(softmax_rows, d, log, x, out);
}

void softmax_backward_rows(bool log, const Tensor& y, const Tensor& g, const Tensor& dx) {
  const Device d = device_of("softmax_backward_rows", {&y, &g, &dx});
  OCTET_DISPATCH(softmax_backward_rows, d, log, y, g, dx);
}

void cross_entropy_backward_rows(const Tensor& logp, const Tensor& target, const Tensor& coef, double smoothing,
                                 const Tensor& dx) {
  const Device d = device_of("cross_entropy_backward_rows", {&logp, &target, &coef, &dx});
  OCTET_DISPATCH(cross_entropy_backward_rows, d, logp, target, coef, smoothing, dx);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a, int64_t lda,
          const Tensor& b, int64_t ldb, double beta, const Tensor& c, int64_t ldc) {
  const Device d = device_of("gemm", {&a, &b, &c});
  OCTET_DISPATCH(gemm, d, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  const Device d = device_of("conv2d_forward", {&x, &w, &bias, &out});
  OCTET_DISPATCH(conv2d_forward, d, g, x, w, bias, out);
}

void conv2d_backward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout, const Tensor& dx,
                     const Tensor& dw) {
  const Device d = device_of("conv2d_backward", {&x, &w, &dout, &dx, &dw});
  OCTET_DISPATCH(conv2d_backward, d, g, x, w, dout, dx, dw);
}

void attention_forward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& key_padding_mask, const Tensor& out, const Tensor& lse) {
  const Device d = device_of("attention_forward", {&q, &k, &v, &key_padding_mask, &out, &lse});
  OCTET_DISPATCH(attention_forward, d, g, q, k, v, key_padding_mask, out, lse);
}

void attention_backward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_padding_mask, const Tensor& out, const Tensor& dout, const Tensor& lse,
                        const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const Device d = device_of("attention_backward", {&q, &k, &v, &key_padding_mask, &out, &dout, &lse, &dq, &dk, &dv});
  OCTET_DISPATCH(attention_backward, d, g, q, k, v, key_padding_mask, out, dout, lse, dq, dk, dv);
}

void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out, const Tensor& indices) {
  const Device d = device_of("max_pool2d_forward", {&x, &out, &indices});
  OCTET_DISPATCH(max_pool2d_forward, d, g, x, out, indices);
}

void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& indices, const Tensor& dx) {
  const Device d = device_of("max_pool2d_backward", {&dout, &indices, &dx});
  OCTET_DISPATCH(max_pool2d_backward, d, g, dout, indices, dx);
}

void avg_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out) {
  const Device d = device_of("avg_pool2d_forward", {&x, &out});
  OCTET_DISPATCH(avg_pool2d_forward, d, g, x, out);
}

void avg_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& dx) {
  const Device d = device_of("avg_pool2d_backward", {&dout, &dx});
  OCTET_DISPATCH(avg_pool2d_backward, d, g, dout, dx);
}

void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& out) {
  const Device d = device_of("adaptive_avg_pool2d_forward", {&x, &out});
  OCTET_DISPATCH(adaptive_avg_pool2d_forward, d, x, out);
}

void adaptive_avg_pool2d_backward(const Tensor& dout, const Tensor& dx) {
  const Device d = device_of("adaptive_avg_pool2d_backward", {&dout, &dx});
  OCTET_DISPATCH(adaptive_avg_pool2d_backward, d, dout, dx);
}

void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                        const Tensor& mean, const Tensor& invstd, NormActivation act, const Tensor& residual) {
  const Device d = device_of("batch_norm_forward", {&x, &weight, &bias, &out, &mean, &invstd, &residual});
  OCTET_DISPATCH(batch_norm_forward, d, x, weight, bias, eps, out, mean, invstd, act, residual);
}

void batch_norm_act_grad(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const Tensor& mean, const Tensor& invstd, NormActivation act, const Tensor& out) {
  const Device d = device_of("batch_norm_act_grad", {&dout, &x, &weight, &bias, &mean, &invstd, &out});
  OCTET_DISPATCH(batch_norm_act_grad, d, dout, x, weight, bias, mean, invstd, act, out);
}

void batch_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const Device d = device_of("batch_norm_backward", {&dout, &x, &weight, &mean, &invstd, &dx, &dweight, &dbias});
  OCTET_DISPATCH(batch_norm_backward, d, dout, x, weight, mean, invstd, dx, dweight, dbias);
}

void gather_rows(const Tensor& x, const Tensor& index, const Tensor& out) {
  const Device d = device_of("gather_rows", {&x, &index, &out});
  OCTET_DISPATCH(gather_rows, d, x, index, out);
}

void scatter_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src) {
  const Device d = device_of("scatter_add_rows", {&dx, &index, &src});
  OCTET_DISPATCH(scatter_add_rows, d, dx, index, src);
}

void index_select_rows(const Tensor& x, const Tensor& index, const Tensor& out) {
  const Device d = device_of("index_select_rows", {&x, &index, &out});
  OCTET_DISPATCH(index_select_rows, d, x, index, out);
}

void index_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src) {
  const Device d = device_of("index_add_rows", {&dx, &index, &src});
  OCTET_DISPATCH(index_add_rows, d, dx, index, src);
}

void lstm_gates_forward(const Tensor& gates, const Tensor& bias, const Tensor& c_prev, const Tensor& c,
                        const Tensor& h) {
  const Device d = device_of("lstm_gates_forward", {&gates, &bias, &c_prev, &c, &h});
  OCTET_DISPATCH(lstm_gates_forward, d, gates, bias, c_prev, c, h);
}

void lstm_gates_backward(const Tensor& act, const Tensor& c_prev, const Tensor& c, const Tensor& dy,
                         const Tensor& dh_next, const Tensor& dc_next, const Tensor& dgates, const Tensor& dc_prev) {
  const Device d = device_of("lstm_gates_backward", {&act, &c_prev, &c, &dy, &dh_next, &dc_next, &dgates, &dc_prev});
  OCTET_DISPATCH(lstm_gates_backward, d, act, c_prev, c, dy, dh_next, dc_next, dgates, dc_prev);
}

#undef OCTET_DISPATCH

}  // namespace octet::kernels
