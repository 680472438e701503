// CUDA implementations of the kernels declared in core/kernels.h (same signatures), reached
// through the device dispatch in core/kernels.cpp. Pure C++ declarations: no CUDA headers here.
#pragma once

#include "core/kernels.h"

namespace octet::cuda {

// Makes a device current for a scope (nothing to do when it already is). The dispatch in
// core/kernels.cpp holds one around every kernel, so kernels and library calls run on the device
// their tensors live on.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0, device_ = 0;
};

using kernels::Conv2dGeometry;
using kernels::Pool2dGeometry;

void copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, double value);
void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset);
void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset);
void unary(UnaryOp op, const Tensor& x, const Tensor& out, double a = 0, double b = 0);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out);
void arg_reduce_rows(bool is_max, const Tensor& x, const Tensor& out);
void softmax_rows(bool log, const Tensor& x, const Tensor& out);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a, int64_t lda,
          const Tensor& b, int64_t ldb, double beta, const Tensor& c, int64_t ldc);
void conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out);
void conv2d_backward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout, const Tensor& dx,
                     const Tensor& dw);
void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out, const Tensor& indices);
void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& indices, const Tensor& dx);
void avg_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out);
void avg_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& dx);
void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& out);
void adaptive_avg_pool2d_backward(const Tensor& dout, const Tensor& dx);
void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                        const Tensor& mean, const Tensor& invstd);
void batch_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);
void gather_rows(const Tensor& x, const Tensor& index, const Tensor& out);
void scatter_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src);
void index_select_rows(const Tensor& x, const Tensor& index, const Tensor& out);
void index_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src);

}  // namespace octet::cuda
