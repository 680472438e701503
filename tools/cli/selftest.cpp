#include "tools/cli/selftest.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "core/octet.h"

namespace octet::cli {

namespace {

// Two-layer MLP on a fixed synthetic 3-class problem.
struct Mlp {
  Tensor w1, b1, w2, b2;
  explicit Mlp(DType dt, Generator& g) {
    w1 = randn({16, 8}, dt, &g) * (1.0 / std::sqrt(8.0));
    b1 = zeros({16}, dt);
    w2 = randn({3, 16}, dt, &g) * 0.25;
    b2 = zeros({3}, dt);
    for (Tensor* p : params()) p->requires_grad_(true);
  }
  std::vector<Tensor*> params() { return {&w1, &b1, &w2, &b2}; }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    return cross_entropy(linear(gelu(linear(x, w1, b1)), w2, b2), y);
  }
};

}  // namespace

int run_selftest(int threads) {
  set_num_threads(threads);
  spdlog::info("octet selftest: {} thread(s), CUDA compiled: {}, CUDA devices: {}", get_num_threads(),
               cuda_compiled() ? "yes" : "no", cuda_device_count());
  Generator g(7);
  Tensor x = randn({32, 8}, DType::f64, &g);
  // Labels from a fixed rule so the model has something to learn.
  Tensor y = argmax(matmul(x, randn({8, 3}, DType::f64, &g)), 1);

  // 1. Gradient check of the whole model in float64.
  Mlp m(DType::f64, g);
  m.loss(x, y).backward();
  double worst = 0;
  for (Tensor* p : m.params()) {
    std::vector<double> analytic = p->grad().to_vector<double>();
    for (int64_t i = 0; i < p->numel(); i += std::max<int64_t>(1, p->numel() / 5)) {
      double* v = p->data<double>() + i;
      double orig = *v, eps = 1e-6;
      NoGradGuard ng;
      *v = orig + eps;
      double up = m.loss(x, y).item();
      *v = orig - eps;
      double down = m.loss(x, y).item();
      *v = orig;
      worst = std::max(worst, std::abs((up - down) / (2 * eps) - analytic[i]));
    }
  }
  bool grads_ok = worst < 1e-6;
  spdlog::info("gradient check (f64, finite differences): max abs error {:.2e} -> {}", worst,
               grads_ok ? "ok" : "FAILED");

  // 2. A few steps of plain SGD in float32: the loss must go down.
  Mlp f(DType::f32, g);
  Tensor xf = x.to(DType::f32);
  auto start = std::chrono::steady_clock::now();
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    for (Tensor* p : f.params()) p->set_grad(Tensor());
    Tensor loss = f.loss(xf, y);
    loss.backward();
    NoGradGuard ng;
    for (Tensor* p : f.params()) p->copy_(*p - p->grad() * 0.5);
    last = loss.item();
    if (step == 0) first = last;
    if (step % 10 == 0) spdlog::info("step {:2d}  loss {:.4f}", step, last);
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  bool trains = last < 0.5 * first;
  spdlog::info("SGD: loss {:.4f} -> {:.4f} in 50 steps ({:.1f} ms) -> {}", first, last, ms, trains ? "ok" : "FAILED");
  bool ok = grads_ok && trains;
  spdlog::info("selftest {}", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace octet::cli
