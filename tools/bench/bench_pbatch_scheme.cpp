// PrecisionBatching quality at equal bits: octet's quantization scheme against the paper's (its
// reference code's: power-of-two weight grid with its mean-|error| clip search, static activation
// scale 2^-6 with wrap-around), each with a per-tensor and a per-row weight step (quant/pbatch.h).
// Two measures:
//  - the weights' relative error ||W - d q|| / ||W|| (L2 over a matrix) for every quantized matrix of
//    the models given (an MLP trained here; --lm RUN_DIR adds an LstmLm checkpoint's LSTM matrices);
//  - an MLP's test accuracy on Fashion-MNIST with every layer quantized (the last included, as the
//    paper's MNIST experiment), trained here (784-H-H-10, ReLU, Adam, seed 0).
// The LM's perplexity comes from `octet eval RUN --pbatch w=N,a=K,scheme=paper[,row_step=1]`.
//   build/tools/bench/octet_bench_pbatch_scheme [--hidden 512] [--epochs 2] [--threads 2]
//        [--data /usr/share/datasets/fashion-mnist] [--lm runs/lstm_lm_tiny/best.safetensors] [--mlp 0|1]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/octet.h"
#include "data/mnist.h"
#include "layers/activation.h"
#include "layers/linear.h"
#include "layers/sequential.h"
#include "optim/adam.h"
#include "quant/precision.h"

using namespace octet;

namespace {

struct Args {
  int64_t hidden = 512, epochs = 2, threads = 2;
  bool mlp = true;  // --mlp 0: only the LM's weight errors
  std::string data = "/usr/share/datasets/fashion-mnist", lm;
};

struct Split {
  Tensor x, y;  // f32 [N, 784], i64 [N]
};

Split load(const std::string& root, bool train) {
  auto ds = fashion_mnist(root, train);
  const int64_t n = ds->size();
  Split s{empty({n, 784}, DType::f32), empty({n}, DType::i64)};
  Generator g(0);
  for (int64_t i = 0; i < n; ++i) {
    const Example e = ds->get(i, g);
    const Tensor in = e.input.contiguous();
    std::copy(in.data<float>(), in.data<float>() + 784, s.x.data<float>() + i * 784);
    s.y.data<int64_t>()[i] = e.label;
  }
  return s;
}

double accuracy(Module& m, const Split& s) {
  NoGradGuard ng;
  m.eval();
  int64_t ok = 0;
  const int64_t n = s.x.size(0);
  for (int64_t b0 = 0; b0 < n; b0 += 1000) {
    const int64_t nb = std::min<int64_t>(1000, n - b0);
    const auto pred = argmax(m(s.x.narrow(0, b0, nb)), 1).to_vector<int64_t>();
    const auto want = s.y.narrow(0, b0, nb).to_vector<int64_t>();
    for (size_t i = 0; i < pred.size(); ++i) ok += pred[i] == want[i];
  }
  return 100.0 * static_cast<double>(ok) / static_cast<double>(n);
}

// ||W - d q|| / ||W|| of one matrix under c.
double weight_error(const Tensor& w, const quant::PbConfig& c) {
  const quant::PbWeights pw = quant::pb_preprocess(w, c);
  const std::vector<int32_t> q = quant::pb_decode(pw).to_vector<int32_t>();
  const std::vector<float> v = w.contiguous().to_vector<float>();
  const std::vector<double> steps = pw.row_steps.defined() ? pw.row_steps.to_vector<double>() : std::vector<double>();
  double e = 0.0, n = 0.0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double d = steps.empty() ? pw.step : steps[i / static_cast<size_t>(pw.cols)];
    e += (d * q[i] - v[i]) * (d * q[i] - v[i]);
    n += static_cast<double>(v[i]) * v[i];
  }
  return std::sqrt(e / n);
}

quant::PbConfig config(int w, int a, quant::PbScheme s, bool row) {
  quant::PbConfig c;
  c.w_bits = w, c.a_bits = a, c.scheme = s, c.row_step = row;
  return c;
}

const quant::PbScheme kSchemes[] = {quant::PbScheme::octet, quant::PbScheme::paper};

// Mean relative weight error over `mats` for each (w, scheme, row step).
void weight_table(const std::string& title, const std::vector<Tensor>& mats) {
  std::printf("\n### Relative weight error ||W - dq|| / ||W||, mean over %s (%zu matrices)\n\n", title.c_str(),
              mats.size());
  std::printf("| w | octet | octet per-row | paper | paper per-row |\n|---|---:|---:|---:|---:|\n");
  for (int w : {1, 2, 4, 8}) {
    std::printf("| %d", w);
    for (quant::PbScheme s : kSchemes)
      for (bool row : {false, true}) {
        double e = 0.0;
        for (const Tensor& m : mats) e += weight_error(m, config(w, 16, s, row));
        std::printf(" | %.4f", e / static_cast<double>(mats.size()));
      }
    std::printf(" |\n");
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--hidden")
      a.hidden = std::atoll(v.c_str());
    else if (k == "--epochs")
      a.epochs = std::atoll(v.c_str());
    else if (k == "--threads")
      a.threads = std::atoll(v.c_str());
    else if (k == "--data")
      a.data = v;
    else if (k == "--lm")
      a.lm = v;
    else if (k == "--mlp")
      a.mlp = v != "0";
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  set_num_threads(static_cast<int>(a.threads));
  if (!a.lm.empty()) {
    std::vector<Tensor> mats;
    for (const auto& [name, t] : load_safetensors(a.lm).tensors)
      if (name.rfind("model.lstm.weight_", 0) == 0) mats.push_back(t);
    if (mats.empty()) {
      std::fprintf(stderr, "%s: no LSTM weight matrices (model.lstm.weight_*)\n", a.lm.c_str());
      return 1;
    }
    weight_table("the LM's LSTM matrices", mats);
  }
  if (!a.mlp) return 0;

  const Split train = load(a.data, true), test = load(a.data, false);
  manual_seed(0);
  Sequential mlp;
  mlp.push_back(std::make_shared<Linear>(784, a.hidden));
  mlp.push_back(std::make_shared<ReLU>());
  mlp.push_back(std::make_shared<Linear>(a.hidden, a.hidden));
  mlp.push_back(std::make_shared<ReLU>());
  mlp.push_back(std::make_shared<Linear>(a.hidden, 10));
  Adam opt(mlp.named_parameters(), AdamOptions(1e-3));
  std::mt19937 rng(0);
  const int64_t n = train.x.size(0), batch = 128;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  Tensor xb = empty({batch, 784}, DType::f32), yb = empty({batch}, DType::i64);
  for (int64_t epoch = 0; epoch < a.epochs; ++epoch) {
    mlp.train();
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t b0 = 0; b0 + batch <= n; b0 += batch) {
      for (int64_t i = 0; i < batch; ++i) {
        const int64_t j = order[static_cast<size_t>(b0 + i)];
        std::copy(train.x.data<float>() + j * 784, train.x.data<float>() + (j + 1) * 784, xb.data<float>() + i * 784);
        yb.data<int64_t>()[i] = train.y.data<int64_t>()[j];
      }
      Tensor loss = cross_entropy(mlp(xb), yb);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  }
  const double fp32 = accuracy(mlp, test);
  std::vector<Tensor> mats;
  for (const auto& [name, t] : mlp.named_parameters())
    if (t.dim() == 2) mats.push_back(t.detach());
  weight_table("the MLP's Linear matrices", mats);

  std::printf(
      "\n### MLP 784-%lld-%lld-10 on Fashion-MNIST, %lld epochs: test top-1 %%, every layer quantized "
      "(FP32 %.2f)\n\n",
      static_cast<long long>(a.hidden), static_cast<long long>(a.hidden), static_cast<long long>(a.epochs), fp32);
  std::printf("| w | a | octet | octet per-row | paper | paper per-row |\n|---|---:|---:|---:|---:|---:|\n");
  std::vector<std::string> names;
  for (const auto& l : quant::quantizable_layers(mlp)) names.push_back(l.name);
  for (int w : {1, 2, 4, 8})
    for (int act : {8, 16}) {
      std::printf("| %d | %d", w, act);
      for (quant::PbScheme s : kSchemes)
        for (bool row : {false, true}) {
          quant::PrecisionPlan plan;
          for (const std::string& name : names) plan.layers[name] = quant::QuantSpec::pbatch(config(w, act, s, row));
          quant::convert_model(mlp, plan);
          std::printf(" | %.2f", accuracy(mlp, test));
          std::fflush(stdout);
        }
      std::printf(" |\n");
    }
  quant::reset_to_float(mlp);
  return 0;
}
