// Weights to and from PyTorch. `octet export RUN --torch -o model.safetensors` writes the model's
// state_dict alone, under its PyTorch names (octet's module tree follows torchvision's, so for
// mobilenetv2 and resnet18/34/50 the names are torchvision's): no "model." prefix, no optimizer or
// trainer state, so `model.load_state_dict(safetensors.torch.load_file(path))` works on the
// torchvision model of the same configuration. The reverse, the recipe's model.init_from, starts a
// run from such a file (fine-tuning from torchvision weights), with model.init_ignore naming what
// stays at its initialization (a classifier for a new number of classes).
//   export_torch_weights("runs/x", "x.safetensors");
//   init_from_file(*model, "mobilenet_v2.safetensors", {.strict = true, .ignore = {"classifier.*"}});
#pragma once

#include <string>
#include <vector>

#include "layers/module.h"

namespace octet::train {

// Writes the model tensors of a training checkpoint (a run folder: its best checkpoint) to `out`,
// atomically. An export (`octet export --pbatch/--int8`) is refused: it holds quantized layers.
// `dtype` bf16 writes the floating tensors as bf16 (rounded to nearest even; integer buffers such
// as batch norm's step count stay as they are), as model.to(torch.bfloat16).state_dict() holds
// them. Returns the number of tensors written.
size_t export_torch_weights(const std::string& run_or_checkpoint, const std::string& out, DType dtype = DType::f32);

struct InitFromOptions {
  // Every model tensor outside `ignore` must be in the file and every file tensor in the model
  // (PyTorch's strict load_state_dict); false: only the names both have are loaded.
  bool strict = true;
  std::vector<std::string> ignore;  // name globs ('*', '?'): left as initialized, in the file or not
};

struct InitFromReport {
  size_t loaded = 0;                 // tensors copied into the model
  std::vector<std::string> ignored;  // model tensors left as initialized (ignore, or absent when not strict)
  std::vector<std::string> unused;   // file tensors the model has no place for (not strict)
};

// Copies the tensors of `path` (a safetensors state_dict with PyTorch names, or an octet checkpoint,
// whose "model.*" tensors are taken) into `model`; other float dtypes are converted to the model's.
// Errors (an octet::Error naming the file) list missing and unexpected names and every shape that
// differs, and say which recipe keys relax them.
InitFromReport init_from_file(Module& model, const std::string& path, const InitFromOptions& options);

}  // namespace octet::train
