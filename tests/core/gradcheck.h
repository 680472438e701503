// Finite-difference gradient check in float64, shared by every op test.
//   gradcheck([](const auto& v) { return relu(v[0]); }, {randn({3, 4}, f64_grad())});
// Checks d/dx sum(f(x) * r) for a fixed random r against central differences, element by element,
// for every input that requires grad.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "core/octet.h"

namespace octet::testing {

inline TensorOptions f64_grad() { return TensorOptions(DType::f64).requires_grad(true); }

// Random f64 leaf that requires grad, from a fixed seed so failures reproduce.
inline Tensor rand_input(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator g(seed);
  Tensor t = empty(shape, DType::f64);
  t.uniform_(lo, hi, &g);
  t.requires_grad_(true);
  return t;
}

// Pointer to element `linear` (row-major order) of a CPU f64 tensor with any strides.
inline double* element_ptr(const Tensor& t, int64_t linear) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (linear % t.size(d)) * t.stride(d);
    linear /= t.size(d);
  }
  return t.data<double>() + off;
}

// Default tolerances: central differences with eps=1e-6 in f64 have truncation error
// ~eps^2 * f''' and rounding error ~1e-16/eps ~ 1e-10, so 1e-5 absolute is a wide margin.
inline void gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                      double eps = 1e-6, double atol = 1e-5, double rtol = 1e-4) {
  for (const Tensor& x : inputs) ASSERT_TRUE(!x.defined() || x.dtype() == DType::f64) << "gradcheck needs f64 inputs";
  Tensor y = f(inputs);
  Generator g(1234);
  Tensor r = empty(y.shape(), DType::f64);
  r.uniform_(0.5, 1.5, &g);
  for (const Tensor& x : inputs)
    if (x.defined()) x.set_grad(Tensor());
  sum(y * r).backward();

  auto loss = [&]() {
    NoGradGuard ng;
    return sum(f(inputs) * r).item<double>();
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    Tensor analytic = x.grad();
    if (!analytic.defined()) analytic = zeros(x.shape(), DType::f64);
    std::vector<double> a = analytic.to_vector<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double* p = element_ptr(x, i);
      double orig = *p;
      *p = orig + eps;
      double up = loss();
      *p = orig - eps;
      double down = loss();
      *p = orig;
      double numeric = (up - down) / (2 * eps);
      ASSERT_NEAR(a[i], numeric, atol + rtol * std::abs(numeric))
          << "input " << k << " element " << i << " of shape " << ::testing::PrintToString(x.shape());
    }
  }
}

}  // namespace octet::testing
