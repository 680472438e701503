// Trains a two-layer network on XOR through the installed C++ API; exits non-zero unless it learns.
#include <octet/octet.h>

#include <cstdio>

int main() {
  using namespace octet;
  Generator g(1);
  Tensor x = from_vector<float>({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2});
  Tensor y = from_vector<int64_t>({0, 1, 1, 0}, {4});
  Tensor w1 = randn({8, 2}, DType::f32, &g), b1 = zeros({8});
  Tensor w2 = randn({2, 8}, DType::f32, &g) * 0.5, b2 = zeros({2});
  std::vector<Tensor*> params{&w1, &b1, &w2, &b2};
  for (Tensor* p : params) p->requires_grad_(true);
  double loss_value = 0;
  for (int step = 0; step < 500; ++step) {
    Tensor loss = cross_entropy(linear(tanh(linear(x, w1, b1)), w2, b2), y);
    for (Tensor* p : params) p->set_grad(Tensor());
    loss.backward();
    NoGradGuard ng;
    for (Tensor* p : params) p->copy_(*p - p->grad() * 0.5);
    loss_value = loss.item();
  }
  NoGradGuard ng;
  std::vector<int64_t> pred = argmax(linear(tanh(linear(x, w1, b1)), w2, b2), 1).to_vector<int64_t>();
  bool ok = pred == std::vector<int64_t>{0, 1, 1, 0};
  std::printf("two-layer XOR via find_package(octet): final loss %.4f, predictions %s\n", loss_value,
              ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
