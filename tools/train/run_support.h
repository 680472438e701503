// The trainer's helpers (internal to tools/train, not installed): the run folder and its logs,
// the device a recipe names, memory counters, evaluation records, and what went non-finite.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include "core/device.h"
#include "layers/fusion.h"
#include "layers/module.h"
#include "optim/optimizer.h"
#include "tools/train/int8_run.h"
#include "tools/train/metrics.h"
#include "tools/train/recipe.h"
#include "tools/train/task.h"
#include "tools/train/tensorboard.h"

namespace octet::train {

// A new run folder: checkpoint.dir/<run name>, numbered -2, -3, ... if that name is taken.
std::string new_run_dir(const Recipe& r);
// The folder of a checkpoint file, or the run folder itself, with links resolved (runs/latest:
// the run it points at; a bare file name: "."), relative when `resume` is.
std::string run_dir_of(const std::string& resume);
// Whether `dir` is a run folder (a train run wrote its recipe.yaml there), not some folder that
// holds a checkpoint.
bool is_run_folder(const std::string& dir);
// <checkpoint.dir>/latest -> the run folder, replaced atomically, so `octet eval runs/latest` works;
// the trainer points it at a run once the run has a checkpoint (a run that failed before its first
// save does not take it over).
void point_latest_at(const std::string& run_dir);
// The log also goes to `path` (train.log) until drop_file_logs(), each line flushed as it is logged.
void add_file_log(const std::string& path);
void drop_file_logs();
// `message` as an error in the file logs alone (train.log), for an error the caller reports on the console.
void log_error_to_files(const std::string& message);

// The device a recipe's train.device (or `octet eval --device`) names, checked before anything is
// built: cuda needs the CUDA backend in this build and a GPU on this machine.
Device usable_device(const std::string& text, const std::string& what);
// Makes `d` the device of this thread's work and sets TF32 as the recipe says (it is process-wide).
void use_device(Device d, bool allow_tf32);
std::string describe(Device d);
// The CPU thread count `threads` (train.threads, --threads: 1..1024, checked by the caller), with a
// warning naming `what` when it exceeds the cores this process may use: each kernel then waits on
// its descheduled threads (64 threads on 2 cores ran at a fourteenth of the speed).
void use_threads(int64_t threads, const std::string& what);
// Memory of the caching device allocator, for logs and metrics.jsonl (MiB); nothing on the CPU.
void add_memory_stats(Device d, std::map<std::string, double>& values);
std::string memory_text(Device d);

// An evaluation's record in metrics.jsonl (split "test" or "valid") and TensorBoard (if any), with
// `extra` values in the record (after an epoch: the epoch's train_loss, train_top1, train_ppl).
void record_eval(MetricsLog& metrics, TensorBoardWriter* tb, const EvalResult& ev, int64_t step, double epoch,
                 Device device, const std::map<std::string, double>& extra = {});

// Loads `sd` (from the checkpoint file `path`) into `model`; a tensor that does not fit is an error
// naming the file and `what` was built from it (load_state_dict's own names the C++ class), with
// the first of its mismatches (there can be hundreds) and their count.
void load_model_from(Module& model, const NamedTensors& sd, const std::string& path, const std::string& what);
// The same for any load (the optimizer's, an INT8 run's state): `load` run, its Error rephrased.
void load_from(const std::function<void()>& load, const std::string& path, const std::string& what);

// The start of a run's log: its INT8 layers and their settings (nothing without any), and the
// optimizer's state memory and what each optimizer.param_groups entry took.
void log_int8_training(const Int8Run& int8);
// The fusion pass (layers/fusion.h) on `model` as it will run, traced on the task's example; logs
// what it fused ("fused: batch_norm+relu x2, ...") unless nothing.
FusionReport fuse_for_task(Module& model, const Task& task);
void log_fusion(const FusionReport& fusion);
void log_optimizer(const Optimizer& optimizer, const std::string& name, int64_t num_parameters);

// clip_grad_norm's max_norm that never scales: the call only measures the norm.
inline constexpr double kNoClip = std::numeric_limits<double>::infinity();
// What went non-finite at step `step` (epoch and batch 0-based): the loss, and which parameters'
// gradients.
std::string nonfinite_text(const Module& model, const Optimizer& optimizer, const Tensor& loss, int64_t step,
                           int64_t epoch, int64_t batch);

}  // namespace octet::train
