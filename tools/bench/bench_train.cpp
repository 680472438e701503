// Training-step throughput in images/s: forward, cross-entropy, backward and an SGD step
// (momentum 0.9, weight decay 5e-4) on random inputs. tools/bench/bench_train_torch.py times the
// same step in PyTorch.
// - CPU (the default): MobileNetV2 (CIFAR variant) at batch 64 on 32x32 inputs; `--model NAME`
//   any model of the registry (`--image N`, `--classes N`, `--channels C` of the input (default 3;
//   PyTorch is not run for other values); defaults 32 and 10 for the CIFAR models,
//   224 and 1000 for the ImageNet ones); `--int8` times the FP32 and the INT8-trained step
//   (quant.int8_conv) in the same run; `--nchw` also times the FP32 step with channels-last off
//   (core/memory_format.h; the models run channels-last on the CPU by default); `--bf16` also
//   times the step in bf16 mixed precision (AutocastGuard, train.precision: bf16; with --int8, INT8
//   in a bf16 model too) and PyTorch's under torch.autocast(bfloat16). Each of
//   `--rounds` (2) rounds times octet's steps, then PyTorch's (bench_train_torch.py in its own
//   process, for mobilenetv2_cifar, mobilenetv2 and resnet50, when torch is installed;
//   `--torch-script none` skips it), and the end says octet FP32 / PyTorch.
// - `--device cuda`: MobileNetV2-CIFAR at batch 128 (32x32) and ResNet-50 at batch 64 (224x224) on
//   the GPU, then the same two in PyTorch on the same GPU (this program runs
//   `bench_train_torch.py --device cuda`), printed side by side as a markdown table; `--int8` adds
//   a table of octet's INT8-trained step beside its FP32 one.
//   build/tools/bench/octet_bench_train [--threads N] [--batch B] [--steps S] [--rounds R] [--model NAME]
//                                       [--image N] [--classes N] [--channels C] [--int8] [--nchw] [--bf16]
//                                       [--python python3]
//                                       [--torch-script PATH|none]
//   build/tools/bench/octet_bench_train --device cuda [--steps 20] [--rounds 3] [--warmup 5] [--int8]
//                                       [--python python3] [--torch-script PATH|none]
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda.h"
#include "core/octet.h"
#include "optim/sgd.h"
#include "quant/int8_model.h"
#include "tools/bench/bench_util.h"

using namespace octet;

namespace {

using Clock = std::chrono::steady_clock;
using octet::bench::result_lines;
using octet::bench::run_capture;
using octet::bench::shell_quote;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Tensor cyclic_labels(int64_t batch, int64_t classes) {
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = i % classes;
  return from_vector(labels, {batch});
}

// One CPU training setup: a model, its optimizer and a step on fixed inputs.
struct CpuRun {
  std::string label;
  std::shared_ptr<Module> model;
  std::unique_ptr<SGD> opt;
  double best = 1e30, total = 0;
  size_t step_peak = 0;  // the most bytes allocated in a step above those held before it
  // Set before each of this run's steps: the mode at start (OCTET_CHANNELS_LAST), or off for --nchw.
  ChannelsLastMode layout = channels_last_selector().active();
  DType precision = DType::f32;  // bf16: the forward under AutocastGuard
};

// The CPU case: a model at an input size and class count (default: 32x32 and 10 classes for the
// CIFAR models, 224x224 and 1000 for the ImageNet ones), and the PyTorch script to time beside it.
struct CpuCase {
  std::string model;
  int64_t batch = 64, image = 0, classes = 0, steps = 10, rounds = 1, channels = 3;
  int threads = 2;
  bool int8 = false;
  bool nchw = false;  // also time the FP32 step with channels-last off (OCTET_CHANNELS_LAST=off)
  bool bf16 = false;  // also time bf16 mixed precision, octet's and PyTorch's
  std::string python, script;
};

bool cifar_model(const std::string& name) {
  return name.find("cifar") != std::string::npos || name == "resnet20" || name == "resnet32" || name == "resnet44" ||
         name == "resnet56" || name == "resnet110";
}

// `int8_period` 0: FP32; else every convolution but the first INT8 (quant/int8_model.h, the
// recipe defaults: DSGC, stochastic rounding) with a DSGC search every int8_period steps.
void enable_int8_every(Module& model, int64_t int8_period) {
  if (int8_period <= 0) return;
  quant::Int8Config cfg;
  cfg.clip_update_period_ = int8_period;
  quant::enable_int8(model, cfg, /*keep_first_last_float=*/true, 0);
}

CpuRun make_cpu_run(const CpuCase& c, const std::string& label, int64_t int8_period) {
  manual_seed(0);
  CpuRun r{label,
           build_model(ModelOptions().name(c.model).num_classes(c.classes).in_channels(c.channels).image_size(c.image)),
           nullptr};
  enable_int8_every(*r.model, int8_period);
  fuse(*r.model, zeros({1, c.channels, c.image, c.image}));  // as the trainer runs it
  r.model->train();
  r.opt = std::make_unique<SGD>(r.model->named_parameters(), SGDOptions(0.01).momentum(0.9).weight_decay(5e-4));
  return r;
}

// PyTorch's step for the same case, one process per round (bench_train_torch.py --csv): the best
// and mean step in ms, or why there is none in `about`.
struct TorchCpu {
  bool ok = false;
  double best_ms = 0, mean_ms = 0;
  int64_t params = 0;
};
TorchCpu time_torch_cpu(const CpuCase& c, std::string& about, bool bf16 = false) {
  TorchCpu t;
  if (c.script == "none") {
    about = "PyTorch not run (--torch-script none)";
    return t;
  }
  if (c.model != "mobilenetv2_cifar" && c.model != "mobilenetv2" && c.model != "resnet50") {
    about = "PyTorch not run: bench_train_torch.py has mobilenetv2_cifar, mobilenetv2 and resnet50";
    return t;
  }
  if (!std::filesystem::exists(c.script)) {
    about = "PyTorch not run: " + c.script + " not found (--torch-script PATH)";
    return t;
  }
  auto [text, status] = run_capture(shell_quote(c.python) + " " + shell_quote(c.script) + " --csv --threads " +
                                    std::to_string(c.threads) + " --batch " + std::to_string(c.batch) + " --steps " +
                                    std::to_string(c.steps) + " --model " + c.model + " --image " +
                                    std::to_string(c.image) + (bf16 ? " --bf16" : ""));
  std::string last;
  auto lines = result_lines(text, 7, last);
  if (lines.empty()) {
    about = status == -1 ? "PyTorch not run: cannot start " + c.python
                         : "PyTorch failed (exit status " + std::to_string(status) + "): " + last;
    return t;
  }
  t.ok = true;
  t.best_ms = std::atof(lines[0][4].c_str());
  t.mean_ms = std::atof(lines[0][5].c_str());
  t.params = std::atoll(lines[0][6].c_str());
  return t;
}

// With `int8`, FP32 and INT8 steps of the same model are timed in one run, step by step (one step
// of each in turn, so drifting machine load hits both alike), and a third model with a DSGC
// search every step gives the search's cost; the INT8 step time at the default period of 100
// steps is the steady step plus a hundredth of that cost. Each round times octet's steps, then
// PyTorch's in its own process (when torch is installed), so rounds alternate between the two.
int cpu_main(const CpuCase& c) {
  set_num_threads(c.threads);
  std::vector<CpuRun> runs;
  runs.push_back(make_cpu_run(c, "FP32", 0));
  if (c.nchw) {
    runs.push_back(make_cpu_run(c, "FP32 NCHW (channels-last off)", 0));
    runs.back().layout = ChannelsLastMode::off;
  }
  if (c.int8) {
    runs.push_back(make_cpu_run(c, "INT8 (DSGC every 100 steps, none timed)", 100));
    runs.push_back(make_cpu_run(c, "INT8 (DSGC search every step)", 1));
  }
  if (c.bf16) {
    runs.push_back(make_cpu_run(c, "bf16", 0));
    runs.back().precision = DType::bf16;
    if (c.int8) {
      runs.push_back(make_cpu_run(c, "INT8 in bf16 (DSGC every 100 steps, none timed)", 100));
      runs.back().precision = DType::bf16;
    }
    std::printf("bf16: %s\n", autocast::describe(DType::bf16).c_str());
  }
  Generator g(1);
  Tensor x = randn({c.batch, c.channels, c.image, c.image}, DType::f32, &g);
  Tensor y = cyclic_labels(c.batch, c.classes);
  auto step = [&](CpuRun& r) {
    channels_last_selector().set(r.layout);
    Tensor loss;
    {
      AutocastGuard autocast(r.precision);
      loss = cross_entropy((*r.model)(x), y);
    }
    r.opt->zero_grad();
    loss.backward();
    r.opt->step();
    return loss.item();
  };
  for (CpuRun& r : runs) {
    step(r);
    step(r);  // warm-up: oneDNN primitive creation, allocator cache, the first DSGC search
  }
  std::printf("octet %s, batch %lld, %lldx%lld, %lld classes, %d thread(s), %lld round(s) of %lld steps\n",
              c.model.c_str(), static_cast<long long>(c.batch), static_cast<long long>(c.image),
              static_cast<long long>(c.image), static_cast<long long>(c.classes), c.threads,
              static_cast<long long>(c.rounds), static_cast<long long>(c.steps));
  std::vector<TorchCpu> torch, torch_bf16;
  std::string about;
  for (int64_t round = 0; round < c.rounds; ++round) {
    std::vector<double> round_total(runs.size(), 0.0), round_best(runs.size(), 1e30);
    for (int64_t s = 0; s < c.steps; ++s)
      for (size_t i = 0; i < runs.size(); ++i) {
        CpuRun& r = runs[i];
        const size_t before = cpu_memory_stats().allocated;
        reset_cpu_peak();
        auto t0 = Clock::now();
        step(r);
        double dt = seconds_since(t0);
        round_best[i] = std::min(round_best[i], dt);
        round_total[i] += dt;
        r.best = std::min(r.best, dt);
        r.total += dt;
        r.step_peak = std::max(r.step_peak, cpu_memory_stats().peak_allocated - before);
      }
    const double n = static_cast<double>(c.steps);
    for (size_t i = 0; i < runs.size(); ++i)
      std::printf("round %lld: octet %s best %.1f ms, mean %.1f ms\n", static_cast<long long>(round + 1),
                  runs[i].label.c_str(), 1e3 * round_best[i], 1e3 * round_total[i] / n);
    TorchCpu t;
    if (c.channels == 3)
      t = time_torch_cpu(c, about);
    else
      about = "PyTorch not run (its script builds 3-channel models)";
    if (t.ok) {
      std::printf("round %lld: pytorch best %.1f ms, mean %.1f ms\n", static_cast<long long>(round + 1), t.best_ms,
                  t.mean_ms);
      torch.push_back(t);
      if (c.bf16) {
        TorchCpu tb = time_torch_cpu(c, about, true);
        if (tb.ok) {
          std::printf("round %lld: pytorch bf16 autocast best %.1f ms, mean %.1f ms\n",
                      static_cast<long long>(round + 1), tb.best_ms, tb.mean_ms);
          torch_bf16.push_back(tb);
        }
      }
    }
    std::fflush(stdout);
  }
  const double n = static_cast<double>(c.steps * c.rounds), b = static_cast<double>(c.batch);
  for (const CpuRun& r : runs)
    std::printf(
        "octet %s %s train step, batch %lld, %d thread(s): mean %.1f ms, best %.1f ms -> %.1f img/s (mean), %.1f "
        "img/s (best)\n",
        c.model.c_str(), r.label.c_str(), static_cast<long long>(c.batch), c.threads, 1e3 * r.total / n, 1e3 * r.best,
        b * n / r.total, b / r.best);
  // The step's own memory: activations kept for the backward, gradients, workspaces (the model,
  // its gradients and the optimizer state between steps are not counted; oneDNN's scratchpads are
  // not allocated through octet).
  for (const CpuRun& r : runs)
    std::printf("octet %s %s step peak memory above the resident model and optimizer: %.1f MiB\n", c.model.c_str(),
                r.label.c_str(), static_cast<double>(r.step_peak) / (1024.0 * 1024.0));
  if (!torch.empty()) {
    double best = 1e30, mean = 0;
    for (const TorchCpu& t : torch) best = std::min(best, t.best_ms), mean += t.mean_ms;
    mean /= static_cast<double>(torch.size());
    std::printf("pytorch %s train step (%lld parameters; octet %lld): mean %.1f ms, best %.1f ms\n", c.model.c_str(),
                static_cast<long long>(torch[0].params), static_cast<long long>(runs[0].model->num_parameters()), mean,
                best);
    std::printf("octet FP32 / PyTorch step time: %.3f (means), %.3f (bests)\n", 1e3 * runs[0].total / n / mean,
                1e3 * runs[0].best / best);
  } else {
    std::printf("%s\n", about.c_str());
  }
  if (!torch_bf16.empty()) {
    double best = 1e30, mean = 0;
    for (const TorchCpu& t : torch_bf16) best = std::min(best, t.best_ms), mean += t.mean_ms;
    mean /= static_cast<double>(torch_bf16.size());
    std::printf("pytorch %s bf16 autocast train step: mean %.1f ms, best %.1f ms\n", c.model.c_str(), mean, best);
    for (const CpuRun& r : runs)
      if (r.precision == DType::bf16)
        std::printf("octet %s / PyTorch bf16 step time: %.3f (means), %.3f (bests)\n", r.label.c_str(),
                    1e3 * r.total / n / mean, 1e3 * r.best / best);
  }
  for (const CpuRun& r : runs)
    if (r.precision == DType::bf16)
      std::printf("octet %s / FP32 step time: %.3f (means), %.3f (bests)\n", r.label.c_str(), r.total / runs[0].total,
                  r.best / runs[0].best);
  if (c.nchw)
    std::printf("octet FP32 channels-last / NCHW step time: %.3f (means), %.3f (bests)\n",
                runs[0].total / runs[1].total, runs[0].best / runs[1].best);
  if (c.int8) {
    const size_t i8 = c.nchw ? 2 : 1;
    const double fp32 = runs[0].total / n, steady = runs[i8].total / n, search = runs[i8 + 1].total / n - steady;
    const double at100 = steady + search / 100.0;
    std::printf(
        "INT8/FP32 step time (means): steady %.3f; DSGC search %.1f ms per search -> with a search every 100 steps "
        "%.3f\n",
        steady / fp32, 1e3 * search, at100 / fp32);
  }
  return 0;
}

// ---------------------------------------------------------------- GPU

struct GpuCase {
  std::string model;
  int64_t batch, image, classes;
};

// The GPU cases of the CUDA backend issue.
const std::vector<GpuCase> kGpuCases = {{"mobilenetv2_cifar", 128, 32, 10}, {"resnet50", 64, 224, 1000}};

struct GpuResult {
  bool ok = false;
  std::string error;
  double best_ips = 0, mean_ips = 0, peak_mib = 0;
  int64_t params = 0;
};

// `rounds` rounds of `steps` steps after `warmup` steps; the device is synchronized before and
// after each round (and never inside one), so a round's time is the steps' time on the GPU.
// `int8_period` as for make_cpu_run.
GpuResult time_octet(const GpuCase& c, int64_t warmup, int64_t steps, int64_t rounds, int64_t int8_period) {
  GpuResult r;
  try {
    cuda::reset_peak();
    manual_seed(0);
    auto model = build_model(ModelOptions().name(c.model).num_classes(c.classes).in_channels(3).image_size(c.image));
    enable_int8_every(*model, int8_period);
    r.params = model->num_parameters();
    model->to(Device::cuda());
    fuse(*model, zeros({1, 3, c.image, c.image}));  // as the trainer runs it
    model->train();
    SGD opt(model->named_parameters(), SGDOptions(0.01).momentum(0.9).weight_decay(5e-4));
    Generator g(1);
    Tensor x = randn({c.batch, 3, c.image, c.image}, DType::f32, &g).to(Device::cuda());
    Tensor y = cyclic_labels(c.batch, c.classes).to(Device::cuda());
    auto step = [&] {
      Tensor loss = cross_entropy((*model)(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
    };
    for (int64_t s = 0; s < warmup; ++s) step();
    cuda::synchronize();
    double best = 0, sum = 0;
    for (int64_t round = 0; round < rounds; ++round) {
      cuda::synchronize();
      auto t0 = Clock::now();
      for (int64_t s = 0; s < steps; ++s) step();
      cuda::synchronize();
      double ips = static_cast<double>(c.batch * steps) / seconds_since(t0);
      best = std::max(best, ips);
      sum += ips;
    }
    r.best_ips = best;
    r.mean_ips = sum / static_cast<double>(rounds);
    r.peak_mib = static_cast<double>(cuda::memory_stats().peak_allocated) / (1024.0 * 1024.0);
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  try {
    cuda::synchronize();
    cuda::release_cache();  // give the memory back before the next case and before PyTorch runs
  } catch (const std::exception& e) {
    if (r.ok) r.ok = false, r.error = e.what();
  }
  return r;
}

// Runs the PyTorch script and collects its "RESULT,model,batch,best,mean,params,peak_mib" lines;
// `about` gets its "pytorch ..." header line, or why there are no results.
std::map<std::string, GpuResult> time_torch(const std::string& python, const std::string& script, int64_t warmup,
                                            int64_t steps, int64_t rounds, std::string& about) {
  std::map<std::string, GpuResult> out;
  if (script == "none") {
    about = "PyTorch not run (--torch-script none)";
    return out;
  }
  if (!std::filesystem::exists(script)) {
    about = "PyTorch not run: " + script + " not found (--torch-script PATH)";
    return out;
  }
  std::string cmd = shell_quote(python) + " " + shell_quote(script) + " --device cuda --model all --csv --warmup " +
                    std::to_string(warmup) + " --steps " + std::to_string(steps) + " --rounds " +
                    std::to_string(rounds);
  auto [text, status] = run_capture(cmd);
  if (status == -1) {
    about = "PyTorch not run: cannot start " + python;
    return out;
  }
  std::string last;
  for (const auto& f : result_lines(text, 7, last, &about)) {
    GpuResult r;
    r.ok = true;
    r.best_ips = std::atof(f[3].c_str());
    r.mean_ips = std::atof(f[4].c_str());
    r.params = std::atoll(f[5].c_str());
    r.peak_mib = std::atof(f[6].c_str());
    out[f[1] + "/" + f[2]] = r;
  }
  if (out.empty()) about = "PyTorch failed (exit status " + std::to_string(status) + "): " + last;
  return out;
}

// The INT8-trained step beside the FP32 one (`fp32`, timed before): every convolution but the first
// INT8, DSGC searches every 100 steps (the recipe default; none falls in the timed steps).
bool gpu_int8_table(const std::vector<GpuResult>& fp32, int64_t warmup, int64_t steps, int64_t rounds) {
  std::printf(
      "\n## GPU training step: INT8 (every convolution but the first; DSGC every 100 steps) vs FP32, octet\n\n"
      "| model | batch | FP32 img/s (best / mean) | INT8 img/s (best / mean) | INT8 / FP32 (best) | peak MiB FP32 / "
      "INT8 "
      "|\n|---|---|---|---|---|---|\n");
  bool ok = true;
  for (size_t i = 0; i < kGpuCases.size(); ++i) {
    const GpuCase& c = kGpuCases[i];
    const GpuResult q = time_octet(c, warmup, steps, rounds, 100), &f = fp32[i];
    if (!q.ok) {
      std::printf("| %s | %lld | INT8 failed: %s |\n", c.model.c_str(), static_cast<long long>(c.batch),
                  q.error.c_str());
      ok = false;
      continue;
    }
    std::printf("| %s | %lld | %.1f / %.1f | %.1f / %.1f | %.2f | %lld / %lld |\n", c.model.c_str(),
                static_cast<long long>(c.batch), f.best_ips, f.mean_ips, q.best_ips, q.mean_ips,
                f.best_ips > 0 ? q.best_ips / f.best_ips : 0.0, static_cast<long long>(f.peak_mib),
                static_cast<long long>(q.peak_mib));
  }
  return ok;
}

int gpu_main(int64_t warmup, int64_t steps, int64_t rounds, const std::string& python, const std::string& script,
             bool int8) {
  if (!cuda::is_available()) {
    std::fprintf(stderr, "octet_bench_train --device cuda: %s\n",
                 cuda_compiled() ? "no CUDA device is available on this machine"
                                 : "the CUDA backend is not built (configure with -DOCTET_CUDA=ON)");
    return 1;
  }
  std::vector<GpuResult> ours;
  for (const GpuCase& c : kGpuCases) ours.push_back(time_octet(c, warmup, steps, rounds, 0));
  std::string about;
  std::map<std::string, GpuResult> torch = time_torch(python, script, warmup, steps, rounds, about);

  std::printf("## GPU training step: octet vs PyTorch, f32\n\n");
  std::printf("- octet on %s (driver CUDA %s, cuDNN %s), TF32 %s\n", cuda::device_name(0).c_str(),
              cuda::driver_version().c_str(), cuda::cudnn_version().c_str(), cuda::allow_tf32() ? "on" : "off");
  std::printf("- %s\n", about.c_str());
  std::printf(
      "- step: forward, cross-entropy, backward, SGD (momentum 0.9, weight decay 5e-4) on random inputs already on "
      "the GPU; %lld warm-up steps, then %lld rounds of %lld steps with a device synchronize around each round\n\n",
      static_cast<long long>(warmup), static_cast<long long>(rounds), static_cast<long long>(steps));
  std::printf(
      "| model | batch | input | parameters | octet img/s (best / mean) | PyTorch img/s (best / mean) | octet / "
      "PyTorch (best) | peak MiB octet / PyTorch |\n|---|---|---|---|---|---|---|---|\n");
  bool all_ok = true;
  for (size_t i = 0; i < kGpuCases.size(); ++i) {
    const GpuCase& c = kGpuCases[i];
    const GpuResult& o = ours[i];
    auto it = torch.find(c.model + "/" + std::to_string(c.batch));
    const GpuResult* t = it == torch.end() ? nullptr : &it->second;
    char ocol[64] = "error", tcol[64] = "n/a", ratio[32] = "n/a", mem[64];
    if (o.ok) std::snprintf(ocol, sizeof(ocol), "%.1f / %.1f", o.best_ips, o.mean_ips);
    if (t) std::snprintf(tcol, sizeof(tcol), "%.1f / %.1f", t->best_ips, t->mean_ips);
    if (o.ok && t && t->best_ips > 0) std::snprintf(ratio, sizeof(ratio), "%.2f", o.best_ips / t->best_ips);
    std::snprintf(mem, sizeof(mem), "%s / %s", o.ok ? std::to_string(static_cast<int64_t>(o.peak_mib)).c_str() : "-",
                  t ? std::to_string(static_cast<int64_t>(t->peak_mib)).c_str() : "-");
    std::string params =
        std::to_string(o.params) + (t && t->params != o.params ? " (torch " + std::to_string(t->params) + ")" : "");
    std::printf("| %s | %lld | %lldx%lld | %s | %s | %s | %s | %s |\n", c.model.c_str(),
                static_cast<long long>(c.batch), static_cast<long long>(c.image), static_cast<long long>(c.image),
                params.c_str(), ocol, tcol, ratio, mem);
    all_ok = all_ok && o.ok;
  }
  for (size_t i = 0; i < kGpuCases.size(); ++i)
    if (!ours[i].ok) std::printf("\noctet %s failed: %s\n", kGpuCases[i].model.c_str(), ours[i].error.c_str());
  if (int8) all_ok = gpu_int8_table(ours, warmup, steps, rounds) && all_ok;
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  int64_t batch = 64, steps = -1, rounds = -1, warmup = 5, image = 0, classes = 0, channels = 3;
  std::string model_name = "mobilenetv2_cifar", device = "cpu", python = "python3";
  std::string script = std::string(OCTET_BENCH_DIR) + "/bench_train_torch.py";
  bool int8 = false, nchw = false, bf16 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--bf16")) {
      bf16 = true;
      continue;
    }
    if (!std::strcmp(argv[i], "--int8")) {
      int8 = true;
      continue;
    }
    if (!std::strcmp(argv[i], "--nchw")) {
      nchw = true;
      continue;
    }
    if (i + 1 >= argc) break;
    const char* v = argv[++i];
    if (!std::strcmp(argv[i - 1], "--threads"))
      threads = std::atoi(v);
    else if (!std::strcmp(argv[i - 1], "--batch"))
      batch = std::atoll(v);
    else if (!std::strcmp(argv[i - 1], "--steps"))
      steps = std::atoll(v);
    else if (!std::strcmp(argv[i - 1], "--model"))
      model_name = v;
    else if (!std::strcmp(argv[i - 1], "--device"))
      device = v;
    else if (!std::strcmp(argv[i - 1], "--image"))
      image = std::atoll(v);
    else if (!std::strcmp(argv[i - 1], "--classes"))
      classes = std::atoll(v);
    else if (!std::strcmp(argv[i - 1], "--channels"))
      channels = std::atoll(v);
    else if (!std::strcmp(argv[i - 1], "--rounds"))
      rounds = std::atoll(v);
    else if (!std::strcmp(argv[i - 1], "--warmup"))
      warmup = std::atoll(v);
    else if (!std::strcmp(argv[i - 1], "--python"))
      python = v;
    else if (!std::strcmp(argv[i - 1], "--torch-script"))
      script = v;
    else {
      std::fprintf(stderr, "octet_bench_train: unknown option '%s'\n", argv[i - 1]);
      return 2;
    }
  }
  if (device == "cuda") return gpu_main(warmup, steps > 0 ? steps : 20, rounds > 0 ? rounds : 3, python, script, int8);
  if (device != "cpu") {
    std::fprintf(stderr, "octet_bench_train: --device must be cpu or cuda, got '%s'\n", device.c_str());
    return 2;
  }
  CpuCase c;
  c.model = model_name;
  c.batch = batch;
  c.image = image > 0 ? image : cifar_model(model_name) ? 32 : 224;
  c.classes = classes > 0 ? classes : cifar_model(model_name) ? 10 : 1000;
  if (channels < 1) {
    std::fprintf(stderr, "octet_bench_train: --channels must be at least 1, got %lld\n",
                 static_cast<long long>(channels));
    return 2;
  }
  c.channels = channels;
  c.steps = steps > 0 ? steps : 10;
  c.rounds = rounds > 0 ? rounds : 2;
  c.threads = threads;
  c.int8 = int8;
  c.nchw = nchw;
  c.bf16 = bf16;
  c.python = python;
  c.script = script;
  return cpu_main(c);
}
