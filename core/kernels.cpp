// Device dispatch for core/kernels.h: one switch per kernel on the device of its first tensor.
#include "core/kernels.h"

#include "core/cpu/kernels.h"

namespace octet::kernels {

[[noreturn]] static void no_device(const char* kernel, Device d) {
  OCTET_FAIL(kernel, ": no kernel for device ", d, " in this build");
}

void copy(const Tensor& dst, const Tensor& src) {
  Device d = dst.device();
  if (d.is_cpu()) return cpu::copy(dst, src);
  no_device("copy", d);
}

void fill(const Tensor& dst, double value) {
  Device d = dst.device();
  if (d.is_cpu()) return cpu::fill(dst, value);
  no_device("fill", d);
}

void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset) {
  Device d = dst.device();
  if (d.is_cpu()) return cpu::uniform(dst, low, high, seed, offset);
  no_device("uniform", d);
}

void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  Device d = dst.device();
  if (d.is_cpu()) return cpu::normal(dst, mean, std, seed, offset);
  no_device("normal", d);
}

void unary(UnaryOp op, const Tensor& x, const Tensor& out, double a, double b) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::unary(op, x, out, a, b);
  no_device("unary", d);
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  Device d = a.device();
  if (d.is_cpu()) return cpu::binary(op, a, b, out);
  no_device("binary", d);
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  Device d = a.device();
  if (d.is_cpu()) return cpu::compare(op, a, b, out);
  no_device("compare", d);
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  Device d = cond.device();
  if (d.is_cpu()) return cpu::where(cond, a, b, out);
  no_device("where", d);
}

void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::reduce_rows(op, x, out);
  no_device("reduce_rows", d);
}

void arg_reduce_rows(bool is_max, const Tensor& x, const Tensor& out) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::arg_reduce_rows(is_max, x, out);
  no_device("arg_reduce_rows", d);
}

void softmax_rows(bool log, const Tensor& x, const Tensor& out) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::softmax_rows(log, x, out);
  no_device("softmax_rows", d);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a, int64_t lda,
          const Tensor& b, int64_t ldb, double beta, const Tensor& c, int64_t ldc) {
  Device d = a.device();
  if (d.is_cpu()) return cpu::gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  no_device("gemm", d);
}

void conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::conv2d_forward(g, x, w, bias, out);
  no_device("conv2d_forward", d);
}

void conv2d_backward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout, const Tensor& dx,
                     const Tensor& dw) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::conv2d_backward(g, x, w, dout, dx, dw);
  no_device("conv2d_backward", d);
}

void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out, const Tensor& indices) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::max_pool2d_forward(g, x, out, indices);
  no_device("max_pool2d_forward", d);
}

void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& indices, const Tensor& dx) {
  Device d = dout.device();
  if (d.is_cpu()) return cpu::max_pool2d_backward(g, dout, indices, dx);
  no_device("max_pool2d_backward", d);
}

void avg_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::avg_pool2d_forward(g, x, out);
  no_device("avg_pool2d_forward", d);
}

void avg_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& dx) {
  Device d = dout.device();
  if (d.is_cpu()) return cpu::avg_pool2d_backward(g, dout, dx);
  no_device("avg_pool2d_backward", d);
}

void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& out) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::adaptive_avg_pool2d_forward(x, out);
  no_device("adaptive_avg_pool2d_forward", d);
}

void adaptive_avg_pool2d_backward(const Tensor& dout, const Tensor& dx) {
  Device d = dout.device();
  if (d.is_cpu()) return cpu::adaptive_avg_pool2d_backward(dout, dx);
  no_device("adaptive_avg_pool2d_backward", d);
}

void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                        const Tensor& mean, const Tensor& invstd) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::batch_norm_forward(x, weight, bias, eps, out, mean, invstd);
  no_device("batch_norm_forward", d);
}

void batch_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::batch_norm_backward(dout, x, weight, mean, invstd, dx, dweight, dbias);
  no_device("batch_norm_backward", d);
}

void gather_rows(const Tensor& x, const Tensor& index, const Tensor& out) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::gather_rows(x, index, out);
  no_device("gather_rows", d);
}

void scatter_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src) {
  Device d = dx.device();
  if (d.is_cpu()) return cpu::scatter_add_rows(dx, index, src);
  no_device("scatter_add_rows", d);
}

void index_select_rows(const Tensor& x, const Tensor& index, const Tensor& out) {
  Device d = x.device();
  if (d.is_cpu()) return cpu::index_select_rows(x, index, out);
  no_device("index_select_rows", d);
}

void index_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src) {
  Device d = dx.device();
  if (d.is_cpu()) return cpu::index_add_rows(dx, index, src);
  no_device("index_add_rows", d);
}

}  // namespace octet::kernels
