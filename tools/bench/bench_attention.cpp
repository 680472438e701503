// Scaled dot-product attention (core/ops/attention.h), causal, f32 or bf16: forward alone and forward +
// backward of sum(out * r), for q, k, v [B, H, T, D] at each T, beside PyTorch's
// F.scaled_dot_product_attention (bench_attention_torch.py, run once per round between octet's
// timings: the rounds alternate, and each cell is the best over them). The backward's saved state
// is out and the row log-sum-exp: T values per head besides the inputs, never [T, T]. --dtype bf16
// makes q, k, v bf16 tensors on both sides (as a bf16 model's activations reach attention).
// --dropout P applies attention dropout (training mode) on both sides.
// --save FILE writes, for the first length, q, k, v, r, the output and the gradients to a safetensors
// file that attention_peer_check.py compares with PyTorch's SDPA and an f64 reference (accuracy,
// not time).
//   build/tools/bench/octet_bench_attention [--device cpu|cuda] [--lengths 256,1024,2048] [--batch 1]
//       [--heads 4] [--dim 64] [--dtype f32|bf16] [--dropout 0] [--reps 3] [--rounds 2] [--threads N]
//       [--python python3]
//       [--save FILE]
//       [--torch-script PATH|none]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda.h"
#include "core/octet.h"
#include "core/serialization.h"
#include "tools/bench/bench_util.h"

using namespace octet;
using octet::bench::best_time;
using octet::bench::run_capture;
using octet::bench::shell_quote;

namespace {

struct Args {
  std::string device = "cpu", dtype = "f32", save, python = "python3",
              script = std::string(OCTET_BENCH_DIR) + "/bench_attention_torch.py";
  std::vector<int64_t> lengths{256, 1024, 2048};
  int64_t batch = 1, heads = 4, dim = 64, threads = 0;
  double dropout = 0.0;
  int reps = 3, rounds = 2;
};

struct Times {
  double forward_ms = 1e30, forward_backward_ms = 1e30;
};

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');) out.push_back(std::stoll(x));
  return out;
}

// octet's times for each length (the best of reps), folded into `best`.
void time_octet(const Args& a, Device dev, std::map<int64_t, Times>& best) {
  auto sync = [&] {
    if (dev.is_cuda()) cuda::synchronize();
  };
  for (int64_t t : a.lengths) {
    Generator g(0);
    Tensor q = randn({a.batch, a.heads, t, a.dim}, {}, &g).to(dev),
           k = randn({a.batch, a.heads, t, a.dim}, {}, &g).to(dev);
    Tensor v = randn({a.batch, a.heads, t, a.dim}, {}, &g).to(dev),
           r = randn({a.batch, a.heads, t, a.dim}, {}, &g).to(dev);
    if (a.dtype == "bf16")
      for (Tensor* x : {&q, &k, &v, &r}) *x = x->to(DType::bf16);
    for (Tensor* x : {&q, &k, &v}) x->requires_grad_(true);
    const AttentionOptions causal = AttentionOptions().causal(true).dropout(a.dropout, &g);
    const double fwd = best_time(a.reps, [&] {
      NoGradGuard ng;
      scaled_dot_product_attention(q, k, v, causal);
      sync();
    });
    const double fb = best_time(a.reps, [&] {
      sum(scaled_dot_product_attention(q, k, v, causal) * r).backward();
      sync();
    });
    Times& b = best[t];
    b.forward_ms = std::min(b.forward_ms, fwd * 1e3);
    b.forward_backward_ms = std::min(b.forward_backward_ms, fb * 1e3);
  }
}

// The first length's causal attention on its inputs, forward and backward of sum(out * r), saved to
// a.save for attention_peer_check.py.
void save_case(const Args& a, Device dev) {
  Generator g(0);
  const int64_t t = a.lengths.front();
  std::vector<Tensor> in;
  for (int i = 0; i < 4; ++i) {
    Tensor x = randn({a.batch, a.heads, t, a.dim}, {}, &g).to(dev);
    in.push_back(a.dtype == "bf16" ? x.to(DType::bf16) : x);
  }
  for (int i = 0; i < 3; ++i) in[i].requires_grad_(true);
  Tensor y = scaled_dot_product_attention(in[0], in[1], in[2], AttentionOptions().causal(true));
  sum(y * in[3]).backward();
  auto cpu = [](const Tensor& x) { return x.detach().to(Device::cpu()); };
  save_safetensors(a.save,
                   {{"q", cpu(in[0])},
                    {"k", cpu(in[1])},
                    {"v", cpu(in[2])},
                    {"r", cpu(in[3])},
                    {"y", cpu(y)},
                    {"dq", cpu(in[0].grad())},
                    {"dk", cpu(in[1].grad())},
                    {"dv", cpu(in[2].grad())}},
                   {{"causal", "1"}});
  std::printf("saved T=%lld %s attention to %s\n", static_cast<long long>(t), a.dtype.c_str(), a.save.c_str());
}

// PyTorch's times, folded into `best`; false (and `about` says why) when it did not run.
bool time_torch(const Args& a, std::map<int64_t, Times>& best, std::string& about) {
  std::string lengths;
  for (int64_t t : a.lengths) {
    if (!lengths.empty()) lengths += ',';
    lengths += std::to_string(t);
  }
  const std::string cmd = shell_quote(a.python) + " " + shell_quote(a.script) + " --device " + a.device +
                          " --lengths " + lengths + " --batch " + std::to_string(a.batch) + " --heads " +
                          std::to_string(a.heads) + " --dim " + std::to_string(a.dim) + " --dtype " + a.dtype +
                          " --dropout " + std::to_string(a.dropout) + " --reps " + std::to_string(a.reps) +
                          " --threads " + std::to_string(a.threads);
  const auto [text, status] = run_capture(cmd);
  if (status == -1) {
    about = "PyTorch not run: cannot start " + a.python;
    return false;
  }
  std::string last;
  bool any = false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) last = line;
    if (line.rfind("pytorch ", 0) == 0) about = line;
    if (line.rfind("RESULT,", 0) != 0) continue;
    int64_t t = 0;
    double f = 0, fb = 0;
    if (std::sscanf(line.c_str(), "RESULT,%lld,%lf,%lf", reinterpret_cast<long long*>(&t), &f, &fb) != 3) continue;
    Times& b = best[t];
    b.forward_ms = std::min(b.forward_ms, f);
    b.forward_backward_ms = std::min(b.forward_backward_ms, fb);
    any = true;
  }
  if (!any) about = "PyTorch failed (exit status " + std::to_string(status) + "): " + last;
  return any;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  const std::string problem =
      octet::bench::parse_options(argc, argv,
                                  {
                                      {"--device", octet::bench::into(a.device)},
                                      {"--lengths", [&](const std::string& v) { a.lengths = parse_list(v); }},
                                      {"--batch", octet::bench::into(a.batch)},
                                      {"--heads", octet::bench::into(a.heads)},
                                      {"--dim", octet::bench::into(a.dim)},
                                      {"--dtype", octet::bench::into(a.dtype)},
                                      {"--dropout", octet::bench::into(a.dropout)},
                                      {"--save", octet::bench::into(a.save)},
                                      {"--reps", octet::bench::into(a.reps)},
                                      {"--rounds", octet::bench::into(a.rounds)},
                                      {"--threads", octet::bench::into(a.threads)},
                                      {"--python", octet::bench::into(a.python)},
                                      {"--torch-script", octet::bench::into(a.script)},
                                  });
  if (!problem.empty()) {
    std::fprintf(stderr, "%s: %s\n", "octet_bench_attention", problem.c_str());
    return 2;
  }
  if (a.dtype != "f32" && a.dtype != "bf16") {
    std::fprintf(stderr, "octet_bench_attention: --dtype is f32 or bf16, got %s\n", a.dtype.c_str());
    return 2;
  }
  try {
    const Device dev = Device::parse(a.device);
    if (a.threads > 0) set_num_threads(static_cast<int>(a.threads));
    if (!a.save.empty()) {
      save_case(a, dev);
      return 0;
    }
    std::map<int64_t, Times> ours, theirs;
    std::string about = "PyTorch not run (--torch-script none)";
    bool torch_ok = false;
    for (int round = 0; round < a.rounds; ++round) {
      time_octet(a, dev, ours);
      if (a.script != "none") torch_ok = time_torch(a, theirs, about) || torch_ok;
    }
    std::printf("## Attention, causal, %s: octet vs PyTorch SDPA on %s\n\n", a.dtype.c_str(), a.device.c_str());
    std::printf("- octet: %s, %d threads; B=%lld H=%lld D=%lld; best of %d x %d rounds, alternating\n- %s\n\n",
                dev.is_cuda() ? cuda::device_name(dev.index).c_str() : "cpu", get_num_threads(),
                static_cast<long long>(a.batch), static_cast<long long>(a.heads), static_cast<long long>(a.dim), a.reps,
                a.rounds, about.c_str());
    std::printf(
        "| T | octet fwd ms | PyTorch fwd ms | octet / PyTorch time | octet fwd+bwd ms | PyTorch fwd+bwd ms | octet "
        "/ PyTorch time |\n|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int64_t t : a.lengths) {
      const Times& o = ours[t];
      const bool have = torch_ok && theirs.count(t);
      const Times th = have ? theirs[t] : Times{};
      char f[32] = "-", fr[32] = "-", fb[32] = "-", fbr[32] = "-";
      if (have) {
        std::snprintf(f, sizeof(f), "%.2f", th.forward_ms);
        std::snprintf(fr, sizeof(fr), "%.2f", o.forward_ms / th.forward_ms);
        std::snprintf(fb, sizeof(fb), "%.2f", th.forward_backward_ms);
        std::snprintf(fbr, sizeof(fbr), "%.2f", o.forward_backward_ms / th.forward_backward_ms);
      }
      std::printf("| %lld | %.2f | %s | %s | %.2f | %s | %s |\n", static_cast<long long>(t), o.forward_ms, f, fr,
                  o.forward_backward_ms, fb, fbr);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "octet_bench_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
