// Training-step throughput: MobileNetV2 (CIFAR variant) at batch 64 on 32x32 inputs, forward +
// backward + SGD update, in images/s. tools/bench/bench_train_torch.py times the same step in
// PyTorch with the same threads and batch, for the ratio in RESULTS.md.
//   build/tools/bench/octet_bench_train [--threads N] [--batch B] [--steps S] [--model NAME]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/octet.h"
#include "optim/sgd.h"

using namespace octet;

int main(int argc, char** argv) {
  int threads = 2;
  int64_t batch = 64, steps = 10;
  std::string model_name = "mobilenetv2_cifar";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batch"))
      batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps"))
      steps = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--model"))
      model_name = argv[i + 1];
  }
  set_num_threads(threads);
  manual_seed(0);
  auto model = build_model(ModelOptions().name(model_name).num_classes(10).in_channels(3));
  model->train();
  SGD opt(model->named_parameters(), SGDOptions(0.01).momentum(0.9).weight_decay(5e-4));
  Generator g(1);
  Tensor x = randn({batch, 3, 32, 32}, DType::f32, &g);
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = i % 10;
  Tensor y = from_vector(labels, {batch});
  auto step = [&] {
    Tensor loss = cross_entropy((*model)(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss.item();
  };
  step();
  step();  // warm-up: oneDNN primitive creation, allocator cache
  double best = 1e30, total = 0;
  for (int64_t s = 0; s < steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
    total += dt;
  }
  std::printf(
      "octet %s train step, batch %lld, %d thread(s): mean %.1f ms, best %.1f ms -> %.1f img/s "
      "(mean), %.1f img/s (best)\n",
      model_name.c_str(), static_cast<long long>(batch), threads, 1e3 * total / static_cast<double>(steps), 1e3 * best,
      static_cast<double>(batch) * static_cast<double>(steps) / total, static_cast<double>(batch) / best);
  return 0;
}
