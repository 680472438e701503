// The `octet` command line:
//   octet train RECIPE [section.key=value ...] [--resume RUN_OR_CHECKPOINT]
//   octet eval CHECKPOINT_OR_RUN [--data ROOT] [--device cpu|cuda|cuda:N] [--pbatch w=N,a=K|PLAN.yaml | --int8]
//   octet export CHECKPOINT_OR_RUN --pbatch w=N,a=K|PLAN.yaml | --int8 | --torch -o OUT.safetensors
//   octet sweep CHECKPOINT_OR_RUN [--w-bits 1,2,4,8] [--a-bits 8,16,32] [--scheme octet,paper] [--all-layers] [-o DIR]
//   octet sweep CHECKPOINT_OR_RUN --search [--budget 1%|0.5] [--plan PLAN.yaml]
//   octet generate CHECKPOINT_OR_RUN [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--top-p P]
//                  [--seed S] [--no-kv-cache] [--pbatch w=N,a=K|PLAN.yaml | --int8]
//   octet inspect CHECKPOINT_OR_RUN
//   octet data get NAME [--root DIR]     octet data prepare imagenet --val-tar F --devkit F [--root DIR]
//   octet selftest            (a tiny model checked against finite differences)
//   octet schema              (the recipe keys, as recipes/README.md documents them)
//   octet bench pbatch [--paper-layout] [--sizes 512,1024] [--w-bits 1,4] [--a-bits 8,16] [--threads 1,2]
//   octet help [SUBCOMMAND]     octet --version
// Exit status, as git and most Unix tools: 0 success; 1 a command that failed (a run stopped on an
// error, a corrupt file, a failed download); 2 a usage error (the command line, a recipe or
// override, nothing done); 128 + N a stop by signal N: SIGINT (Ctrl-C) and SIGTERM save the run
// first (130, 143).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>

#include "core/octet.h"
#include "core/stop_signals.h"
#include "tools/bench/pbatch_table.h"
#include "tools/cli/data_cmd.h"
#include "tools/cli/generate.h"
#include "tools/cli/quant_run.h"
#include "tools/cli/selftest.h"
#include "tools/cli/sweep.h"
#include "tools/train/checkpoint.h"
#include "tools/train/recipe.h"
#include "tools/train/suggest.h"
#include "tools/train/torch_weights.h"
#include "tools/train/trainer.h"

namespace {

constexpr int kFailed = 1;      // the command failed
constexpr int kUsageError = 2;  // the command line (or recipe) asks for something octet cannot do

// A metadata value as inspect shows it: a number in its shortest form (77.8, not the stored
// 77.799999999999997, which keeps the exact bits a resume needs).
std::string shown_value(const std::string& v) {
  double x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || v.find_first_of(".eE") == std::string::npos) return v;
  char buf[32];
  const auto [out, ec2] = std::to_chars(buf, buf + sizeof(buf), x);
  return ec2 == std::errc() ? std::string(buf, out) : v;
}

// Metadata that holds no value yet, as training keeps it: the best top-1 of a run that has not
// evaluated (or of a language model, which keeps its best loss), the best loss of a classifier.
bool placeholder(const std::string& key, const std::string& v) {
  return (key == "best_top1" && v == "-1") || (key == "best_loss" && (v == "inf" || v == "Infinity"));
}

int inspect(const std::string& run_or_checkpoint) {
  const std::string path = octet::train::checkpoint_path(run_or_checkpoint);
  octet::SafetensorsFile f = octet::load_safetensors(path);
  int64_t total = 0;
  std::printf("%s: %zu tensors\n", path.c_str(), f.tensors.size());
  for (const auto& [name, t] : f.tensors) {
    std::string shape;
    for (int64_t d : t.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    std::printf("  %-56s %-5s [%s]\n", name.c_str(), std::string(octet::dtype_name(t.dtype())).c_str(), shape.c_str());
    total += t.numel();
  }
  std::printf("%lld elements in all\nmetadata:\n", static_cast<long long>(total));
  for (const auto& [k, v] : f.metadata) {
    if (placeholder(k, v)) continue;
    if (v.find('\n') == std::string::npos) {
      std::printf("  %s: %s\n", k.c_str(), shown_value(v).c_str());
    } else {
      // A language model's vocabulary (task.vocab) runs to thousands of lines: the first ones only.
      constexpr int kMaxLines = 100;
      std::printf("  %s: |\n", k.c_str());
      size_t start = 0;
      int lines = 0;
      while (start < v.size()) {
        size_t end = v.find('\n', start);
        if (end == std::string::npos) end = v.size();
        if (lines++ < kMaxLines) std::printf("    %s\n", v.substr(start, end - start).c_str());
        start = end + 1;
      }
      if (lines > kMaxLines) std::printf("    ... (%d more lines)\n", lines - kMaxLines);
    }
  }
  return 0;
}

// Log colours only where the user sees a terminal: under mpirun (or srun) a rank's output may be a
// pty while the launcher's goes to a file, where the escape codes would land as text.
void plain_log_under_launcher() {
  if (!octet::dist::launched_by_launcher()) return;
  for (const auto& sink : spdlog::default_logger()->sinks())
    if (auto color = std::dynamic_pointer_cast<spdlog::sinks::stdout_color_sink_mt>(sink))
      color->set_color_mode(spdlog::color_mode::never);
}

// One subcommand each: add() declares its options on the app, run() does the work and returns
// the exit status.

struct TrainCommand {
  CLI::App* cmd = nullptr;
  std::string recipe_path, resume;
  std::vector<std::string> overrides;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("train", "train from a YAML recipe");
    cmd->add_option("recipe", recipe_path, "recipe file (recipes/*.yaml); not needed with --resume");
    cmd->add_option("overrides", overrides, "section.key=value overrides");
    cmd->add_option("--resume", resume, "continue a run: its folder or a checkpoint file");
  }
  // What is wrong with the recipe argument, when it is not a recipe file: a run folder or a
  // checkpoint (to resume), an override, or a recipe given with --resume. Empty when nothing is.
  std::string misplaced_recipe() const {
    namespace fs = std::filesystem;
    const bool override_like = recipe_path.find('=') != std::string::npos && !fs::exists(recipe_path);
    if (!resume.empty()) {
      if (recipe_path.empty() || override_like) return "";
      return "train: give a recipe or --resume " + resume + ", not both ('" + recipe_path +
             "'): a resumed run reads the recipe stored in its checkpoint; change its keys with section.key=value";
    }
    if (override_like) return "train: '" + recipe_path + "' is an override; give the recipe file first";
    const std::string resume_it = "; to continue its run: octet train --resume " + recipe_path;
    if (fs::is_directory(recipe_path) && fs::exists(recipe_path + "/last.safetensors"))
      return "train: " + recipe_path + " is a run folder, not a recipe" + resume_it;
    if (fs::is_directory(recipe_path)) return "train: " + recipe_path + " is a folder, not a recipe file";
    if (fs::path(recipe_path).extension() == ".safetensors")
      return "train: " + recipe_path + " is a checkpoint, not a recipe" + resume_it;
    return "";
  }
  int run() {
    // First, before any thread starts: SIGINT and SIGTERM ask the run to stop, taken on a thread of
    // their own: one handled on a thread inside a oneDNN GEMM corrupts the heap (core/stop_signals.h).
    octet::StopSignals stop_signals;
    octet::train::TrainOptions opts;
    opts.resume = resume;
    opts.stop = &stop_signals.requested();
    opts.stop_signal = &stop_signals.signal_number();
    if (resume.empty() && recipe_path.empty()) {
      throw octet::UsageError("train: give a recipe file, or --resume RUN");
    }
    if (const std::string wrong = misplaced_recipe(); !wrong.empty()) throw octet::UsageError(wrong);
    octet::train::Recipe recipe;
    if (resume.empty()) {
      recipe = octet::train::load_recipe(recipe_path, overrides);
    } else {
      // With --resume a first positional is an override (misplaced_recipe() checked that it looks like one).
      if (!recipe_path.empty()) overrides.insert(overrides.begin(), recipe_path);
      opts.overrides = overrides;
    }
    auto result = octet::train::train(recipe, opts);
    if (result.stopped && result.stop_signal > 0) return 128 + result.stop_signal;  // on every rank
    if (!result.run_dir.empty())
      std::printf("run folder: %s\n", result.run_dir.c_str());  // rank 0 of several writes it
    return 0;
  }
};

struct EvalCommand {
  CLI::App* cmd = nullptr;
  std::string ckpt, data_root, device, pbatch;
  std::vector<std::string> overrides;
  int threads = 2;
  bool int8 = false;

  void add(CLI::App& app) {
    cmd = app.add_subcommand(
        "eval", "evaluate a checkpoint on its recipe's test split (a language model: valid and test perplexity)");
    cmd->add_option("checkpoint", ckpt, "checkpoint file (.safetensors) or run folder (its best checkpoint)")
        ->required();
    cmd->add_option("overrides", overrides,
                    "section.key=value overrides of the checkpoint's recipe (data.limit_test=0, "
                    "train.eval_batch_size=64, ...), except the keys that shape the weights (model.*, quant.int8_conv, "
                    "quant.int8_linear)");
    cmd->add_option("--data", data_root, "data folder to use instead of the recipe's data.root")
        ->check(CLI::ExistingDirectory);
    cmd->add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 1024));
    cmd->add_option("--device", device,
                    "cpu, cuda or cuda:N (default: the recipe's train.device if this machine has it, else cpu)");
    cmd->add_option("--pbatch", pbatch,
                    "PrecisionBatching inference: w=N,a=K (weight bits 1..8, activation bits 2..32) for every LSTM "
                    "and Linear but the final output layer, optionally with scheme=paper|octet (paper: the reference "
                    "code's fixed-point grid; a_shift=S with it), row_step=0|1, clip=0|1; or a YAML plan file of "
                    "per-layer precisions (octet sweep --search writes one)");
    cmd->add_flag("--int8", int8,
                  "the zero-point int8 inference baseline (quant/qgemm.h; not INT8 training) for the same layers");
  }
  int run() const {
    const auto q =
        octet::cli::evaluate_quantized(ckpt, data_root, threads, device, octet::cli::cli_plan(pbatch, int8), overrides);
    if (!q.layers.empty())
      std::printf("%s: quantized inference: %s\n", ckpt.c_str(), octet::quant::describe_layers(q.layers).c_str());
    for (const auto& r : q.splits) {
      if (r.tokens)
        std::printf("%s: %s: %lld tokens, loss %.4f, perplexity %.2f\n", ckpt.c_str(), r.split.c_str(),
                    static_cast<long long>(r.examples), r.loss, r.perplexity());
      else
        std::printf("%s: %lld examples, loss %.4f, top-1 %.2f%%, top-5 %.2f%%\n", ckpt.c_str(),
                    static_cast<long long>(r.examples), r.loss, r.top1, r.top5);
    }
    return 0;
  }
};

struct ExportCommand {
  CLI::App* cmd = nullptr;
  std::string ckpt, pbatch, out, dtype = "f32";
  bool int8 = false, torch = false;
  int threads = 2;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("export",
                             "write a checkpoint with its layers quantized and preprocessed, for `octet eval` to run "
                             "as is; or with --torch the model's weights alone, for PyTorch");
    cmd->add_option("checkpoint", ckpt, "checkpoint file (.safetensors) or run folder (its best checkpoint)")
        ->required();
    cmd->add_option("--pbatch", pbatch, "w=N,a=K or a YAML plan file (as for eval)");
    cmd->add_flag("--int8", int8, "the zero-point int8 inference baseline (not INT8 training)");
    cmd->add_flag("--torch", torch,
                  "the model's state_dict with PyTorch's (torchvision's) names and nothing else, for "
                  "model.load_state_dict(safetensors.torch.load_file(OUT))");
    cmd->add_option("--dtype", dtype,
                    "with --torch: f32 (default) or bf16, the floating tensors as model.to(torch.bfloat16) holds "
                    "them")
        ->check(CLI::IsMember({"f32", "bf16"}));
    cmd->add_option("-o,--output", out, "the file to write (.safetensors)")->required();
    cmd->add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 1024));
  }
  int run() const {
    if (torch) {
      if (!pbatch.empty() || int8)
        throw octet::UsageError("export: --torch writes float weights; it takes no --pbatch or --int8");
      const octet::DType t = dtype == "bf16" ? octet::DType::bf16 : octet::DType::f32;
      const size_t n = octet::train::export_torch_weights(ckpt, out, t);
      std::printf("%s: %zu tensors (the model's state_dict, PyTorch names, %s)\n", out.c_str(), n, dtype.c_str());
      return 0;
    }
    if (dtype != "f32") throw octet::UsageError("export: --dtype goes with --torch");
    const auto plan = octet::cli::cli_plan(pbatch, int8);
    if (!plan) throw octet::UsageError("export: give --pbatch w=N,a=K (or a plan file), --int8 or --torch");
    const auto layers = octet::cli::export_quantized(ckpt, *plan, out, threads);
    std::printf("%s: %s\n", out.c_str(), octet::quant::describe_layers(layers).c_str());
    return 0;
  }
};

struct SweepCommand {
  CLI::App* cmd = nullptr;
  std::string ckpt, out, budget = "1%", plan_out;
  bool search = false, no_baselines = false;
  octet::cli::SweepOptions opts;

  void add(CLI::App& app) {
    cmd = app.add_subcommand(
        "sweep",
        "evaluate a checkpoint at every PrecisionBatching (w, a) and the paper's baselines (FP32, int8, W = A at "
        "1/4/8 bits, 16-bit weights), with batch-1 latency, in the paper's table form; CSV + HTML with -o. With "
        "--search: per-layer bits within a quality budget, and the plan file for eval/export --pbatch");
    cmd->add_option("checkpoint", ckpt, "checkpoint file (.safetensors) or run folder (its best checkpoint)")
        ->required();
    cmd->add_option("--w-bits", opts.w_bits, "PrecisionBatching weight bits to try (1..8)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--a-bits", opts.a_bits, "PrecisionBatching activation bits to try (2..32)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--same-bits", opts.same_bits,
                    "the standard-quantization baselines W = A at these bits (1..8; 1: activations on 3 levels)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_flag("--no-baselines", no_baselines, "leave out the W = A and 16-bit-weight baselines");
    cmd->add_option("--scheme", opts.schemes,
                    "PrecisionBatching quantization schemes to run: octet (per-tensor step, L2 clip search, dynamic "
                    "per-row activation scale), paper (the reference code's fixed-point grid and static activation "
                    "scale); octet,paper runs both")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_flag("--all-layers", opts.all_layers,
                  "quantize the final output layer too (the paper's MNIST network); by default it stays float, as "
                  "the paper's LM keeps its decoder");
    cmd->add_option("-o,--output", out, "folder for sweep.csv and sweep.html (with --search: plan.yaml)");
    cmd->add_option("--data", opts.data_root, "data folder to use instead of the recipe's data.root")
        ->check(CLI::ExistingDirectory);
    cmd->add_option("--device", opts.device, "cpu, cuda or cuda:N (default as for eval)");
    cmd->add_option("--threads", opts.threads, "CPU threads")->check(CLI::Range(1, 1024));
    cmd->add_option("--limit", opts.limit,
                    "evaluate the first N test examples only (a language model: N tokens of valid and test); 0: all")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--repeats", opts.repeats, "latency: timed blocks (the median is reported)")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000));
    cmd->add_option("--steps", opts.steps, "latency: batch-1 forwards (tokens) per block")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000));
    cmd->add_flag("--search", search,
                  "per-layer precision search: layer by layer, the lowest (w, a) of --w-bits x --a-bits whose model "
                  "stays within --budget of FP32 (on valid for a language model, else test)");
    cmd->add_option("--budget", budget,
                    "--search's quality budget: '1%' of FP32's quality, or in the metric's units (0.5: accuracy "
                    "points or perplexity)")
        ->capture_default_str();
    cmd->add_option("--plan", plan_out,
                    "--search: the plan file to write (default: <-o folder>/plan.yaml, else plan.yaml)");
  }
  int run() {
    if (no_baselines) opts.same_bits.clear(), opts.w16 = false;
    if (search) return run_search();
    const auto r = octet::cli::run_sweep(ckpt, opts);
    std::printf("%s on %s; quantized layers: %s\n\n%s\n%s", r.checkpoint.c_str(), r.device.c_str(), r.layers.c_str(),
                octet::cli::sweep_markdown(r).c_str(), octet::cli::sweep_grid_markdown(r).c_str());
    if (!out.empty()) {
      const std::vector<std::string> files = octet::cli::write_sweep(out, r);
      std::printf("written: %s, %s\n", files[0].c_str(), files[1].c_str());
    }
    return 0;
  }
  int run_search() {
    const octet::cli::Budget b = octet::cli::parse_budget(budget);
    const auto s = octet::cli::run_search(ckpt, opts, b);
    std::printf("%s on %s\n\n%s", s.checkpoint.c_str(), s.device.c_str(), octet::cli::search_markdown(s).c_str());
    namespace fs = std::filesystem;
    std::string file =
        plan_out.empty() ? (out.empty() ? "plan.yaml" : (fs::path(out) / "plan.yaml").string()) : plan_out;
    if (!out.empty()) fs::create_directories(out);
    octet::write_file_atomic(file, octet::cli::plan_yaml(s));
    std::printf("\nplan: %s (octet eval %s --pbatch %s)\n", file.c_str(), ckpt.c_str(), file.c_str());
    return 0;
  }
};

struct GenerateCommand {
  CLI::App* cmd = nullptr;
  std::string ckpt;
  octet::cli::GenerateOptions opts;

  void add(CLI::App& app) {
    cmd = app.add_subcommand("generate", "sample text from a language model's checkpoint");
    cmd->add_option("checkpoint", ckpt, "checkpoint file (.safetensors) or run folder (its best checkpoint)")
        ->required();
    cmd->add_option("--prompt", opts.prompt_, "text to continue (words the vocabulary lacks become <unk>)");
    cmd->add_option("--tokens", opts.tokens_, "tokens (words or characters) to sample")
        ->capture_default_str()
        ->check(CLI::Range(0, 1000000));
    cmd->add_option("--temperature", opts.temperature_, "softmax temperature; 0: always the most likely token")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1e6));
    cmd->add_option("--top-k", opts.top_k_, "sample among the k most likely tokens only (0: all)")
        ->capture_default_str()
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
    cmd->add_option("--top-p", opts.top_p_,
                    "sample among the fewest most likely tokens whose probabilities reach p (nucleus; 1: all)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--seed", opts.seed_, "seed of the sampling")->capture_default_str();
    cmd->add_flag("!--no-kv-cache", opts.kv_cache_,
                  "GPT: read the whole context again for every token instead of keeping its keys and values");
    cmd->add_option("--pbatch", opts.pbatch_,
                    "decode through PrecisionBatching: w=N,a=K or a YAML plan file (as for eval)");
    cmd->add_flag("--int8", opts.int8_, "decode through the zero-point int8 inference baseline (as for eval)");
    cmd->add_option("--threads", opts.threads_, "CPU threads")->check(CLI::Range(1, 1024));
    cmd->add_option("--device", opts.device_,
                    "cpu, cuda or cuda:N (default: the recipe's train.device if present, else cpu)");
  }
  int run() const {
    std::printf("%s\n", octet::cli::generate_text(ckpt, opts).text.c_str());
    return 0;
  }
};

struct PbatchBenchCommand {
  CLI::App* cmd = nullptr;
  octet::bench::PbBenchOptions opts;

  void add(CLI::App& bench) {
    cmd = bench.add_subcommand(
        "pbatch", "PrecisionBatching (pb_linear) vs FP32 GEMV and the int8 baseline, at batch 1: the paper's Table I");
    cmd->footer(
        "Prints markdown: per thread count, one table. --paper-layout lays it out as the paper's Table I (a row per "
        "method: PBatch-n (a=k), Int8, Float32; a column per size); otherwise a row per size and weight width, a "
        "column per activation width, with the ideal speedup 32/(n+1). Cells: speedup over FP32 (time per call in "
        "microseconds). FP32 is the fastest of octet's matmul, linear and an AVX-512 GEMV; int8 the fastest of "
        "qlinear's GEMM paths; pb_linear and qlinear include the activations' quantization. Medians of --reps "
        "samples after a warm-up; the load average before each table is printed: run it on a quiet machine.");
    cmd->add_option("--sizes", opts.sizes, "square layer sizes N (weights N x N), one column (or row group) each")
        ->delimiter(',')
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    cmd->add_option("--w-bits", opts.w_bits, "PrecisionBatching weight bits (1..8)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--a-bits", opts.a_bits, "PrecisionBatching activation bits (2..32)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--threads", opts.threads,
                    "CPU thread counts, one table each (more than this machine's cores is warned about)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("--device", opts.device, "cpu, cuda or cuda:N")->capture_default_str();
    cmd->add_option("--batch", opts.batch, "rows of x (the paper: 1)")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--reps", opts.reps, "timed samples per measurement (the median is reported)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--min-time", opts.min_time, "seconds per measurement, split over the samples")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 60.0));
    cmd->add_flag("--cpu-time", opts.cpu_time,
                  "with one thread, time by its CPU time (a shared machine: time descheduled not counted)");
    cmd->add_flag("--clip-search", opts.clip_search,
                  "preprocess the weights with the clip search (changes the codes, not the kernel's time)");
    cmd->add_flag("--paper-layout", opts.paper_layout,
                  "the paper's Table I: methods as rows (PBatch-n (a=k), Int8, Float32), sizes as columns");
  }
  int run() const {
    octet::bench::run_pbatch_bench(opts, std::cout);
    return 0;
  }
};

// The names of `cmd`'s subcommands, in the order they were added.
std::vector<std::string> subcommand_names(CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::App* sub : cmd.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// The command the leading words of `args` name (`octet bench pbatch ...`: pbatch), down to one
// without subcommands or to the first option. A word that names no subcommand of the command
// before it is an error naming the known ones and the nearest (`octet trian`: did you mean
// 'train'?), where CLI11 says "A subcommand is required". With `need_leaf`, a command that needs a
// subcommand and got none (`octet bench`) is an error too.
CLI::App& command_named(CLI::App& app, const std::vector<std::string>& args, bool need_leaf) {
  CLI::App* cmd = &app;
  size_t i = 0;
  for (; i < args.size() && !cmd->get_subcommands({}).empty() && args[i].rfind('-', 0) != 0; ++i) {
    const std::vector<std::string> names = subcommand_names(*cmd);
    if (std::find(names.begin(), names.end(), args[i]) == names.end())
      throw CLI::ParseError(cmd->get_name() + ": unknown subcommand '" + args[i] + "'" +
                                octet::train::did_you_mean(args[i], names) +
                                " (known: " + CLI::detail::join(names, ", ") + ")",
                            CLI::ExitCodes::ExtrasError);
    cmd = cmd->get_subcommand(args[i]);
  }
  if (need_leaf && i == args.size() && cmd != &app && cmd->get_require_subcommand_min() > 0)
    throw CLI::ParseError(
        cmd->get_name() + ": give a subcommand (" + CLI::detail::join(subcommand_names(*cmd), ", ") + ")",
        CLI::ExitCodes::RequiredError);
  return *cmd;
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) then makes a write fail with EFBIG, which the save reports as an
  // error (the previous checkpoint kept, the temporary file removed), instead of killing octet.
  std::signal(SIGXFSZ, SIG_IGN);
  plain_log_under_launcher();
  CLI::App app{"octet: low-precision deep learning training", "octet"};
  app.require_subcommand(1);
  app.footer(
      "`octet help SUBCOMMAND` (or `octet SUBCOMMAND --help`) lists a subcommand's options; recipes/README.md "
      "the recipe keys.");
  app.set_version_flag("--version", "octet " OCTET_VERSION);
  TrainCommand train;
  EvalCommand eval;
  ExportCommand exp;
  SweepCommand sweep;
  GenerateCommand gen;
  train.add(app);
  eval.add(app);
  exp.add(app);
  sweep.add(app);
  gen.add(app);
  octet::cli::DataCommand data;
  data.add(app);
  auto* insp = app.add_subcommand("inspect", "list a checkpoint's tensors and metadata");
  std::string insp_path;
  insp->add_option("checkpoint", insp_path, "a .safetensors file, or a run folder (its best checkpoint)")->required();
  auto* selftest = app.add_subcommand("selftest", "run a tiny model forward/backward and check it");
  int st_threads = 2;
  selftest->add_option("--threads", st_threads, "threads for CPU kernels")->check(CLI::Range(1, 1024));
  auto* schema = app.add_subcommand("schema", "print the recipe keys with their types and defaults");
  auto* bench = app.add_subcommand("bench", "kernel benchmarks");
  bench->require_subcommand(1);
  PbatchBenchCommand bench_pb;
  bench_pb.add(*bench);

  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    // `octet` alone is a usage error that shows the help; `octet help [SUBCOMMAND ...]` prints the
    // help of what it names.
    if (args.empty()) {
      std::cerr << app.help();
      return kUsageError;
    }
    if (args[0] == "help") {
      const CLI::App& cmd = command_named(app, {args.begin() + 1, args.end()}, false);
      std::string parents;  // "octet data" for `octet help data get`: its usage line names the whole command
      for (const CLI::App* p = cmd.get_parent(); p != nullptr; p = p->get_parent())
        parents = p->get_name() + (parents.empty() ? "" : " " + parents);
      std::cout << cmd.help(parents);
      return 0;
    }
    command_named(app, args, true);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with CLI11's 0; any other of its codes (105-109) is a usage error.
    return app.exit(e) == 0 ? 0 : kUsageError;
  }
  try {
    if (*train.cmd) return train.run();
    if (*eval.cmd) return eval.run();
    if (*exp.cmd) return exp.run();
    if (*sweep.cmd) return sweep.run();
    if (*gen.cmd) return gen.run();
    if (data.chosen()) return data.run();
    if (*insp) return inspect(insp_path);
    if (*selftest) return octet::cli::run_selftest(st_threads);
    if (*bench_pb.cmd) return bench_pb.run();
    if (*schema) {
      std::printf("%s", octet::train::schema_markdown().c_str());
      return 0;
    }
  } catch (const octet::UsageError& e) {
    spdlog::error("{}", e.what());
    return kUsageError;
  } catch (const octet::Error& e) {
    spdlog::error("{}", e.what());
    return kFailed;
  } catch (const std::exception& e) {
    spdlog::error("unexpected error: {}", e.what());
    return kFailed;
  }
  return 0;
}
