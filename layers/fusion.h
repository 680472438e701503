// The fusion pass (PyTorch's fuse_modules, with the groups found by a trace instead of listed by
// hand): models are written as the math -- relu2(add(bn2(conv2(relu1(bn1(conv1(x))))), x)) -- and
// one call sets up the fused forms their layers can run, each giving the unfused bits:
//   batch norm -> ReLU/ReLU6            one op (core/ops/norm.h), no activation kept for the backward
//   batch norm -> Add (-> ReLU)         the residual added (and the ReLU applied) in the norm's output pass
//   batch norm -> ReLU(6) -> INT8 conv  the norm writes the convolution's int8 codes
//                                       (quant::int8_conv2d_batch_norm; training mode, quant::int8_bn_fusion)
//   the model's input -> first conv     channels-last, where it measured faster (core/memory_format.h)
//   auto model = build_model(ModelOptions().name("resnet20"));
//   FusionReport r = fuse(*model, example_batch);   // the trainer and `octet eval` do this
//   spdlog::info("{}", r.describe());                // "batch_norm+add+relu x9, batch_norm+relu x10, ..."
//
// How it finds the groups: fuse() runs one forward of the plain model on `example` (in eval mode,
// with grad recorded, no state changed) while the modules the rules match record their calls
// (fusion::record). A group is fused only where the data flow is a chain: each member registered
// in the model and called once in that forward, and each output used by the next member alone (counted in the autograd
// graph, so a use outside any module counts too). The layers run the fused forms themselves, from what the pass set on
// them (BatchNorm2d::act_, Conv2d::input_bn_, ...), so a model's own code never changes and its state_dict keeps its
// names. A new fusion is a rule in fusion.cpp's list plus the fused form in the layer that runs it.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "layers/module.h"

namespace octet {

struct FusionReport {
  struct Group {
    std::string rule;                  // e.g. "batch_norm+relu"
    std::vector<std::string> modules;  // dotted names, in data-flow order ("" is the model itself)
  };
  std::vector<Group> groups;
  // Groups fused by `rule`.
  size_t count(const std::string& rule) const;
  // One line for the log: "batch_norm+relu6 x17, batch_norm+add x10, channels_last x1".
  std::string describe() const;
};

// Clears what an earlier fuse() set, traces one forward of `model` on `example` (cast to the
// model's floating dtype and moved to its device) and applies every rule. The model's training
// flags, parameters, buffers and the random generators are as before. A model with no module a
// rule matches is not run. Call it again after changing the model (INT8 layers, new children).
FusionReport fuse(Module& model, const Tensor& example);
// Back to the plain forms (what fuse() set, cleared).
void unfuse(Module& model);

namespace fusion {
// Called at the end of forward by the modules the rules match (BatchNorm2d, ReLU, ReLU6, Conv2d,
// Add): while fuse() traces, notes the call; otherwise does nothing.
void record(Module& m, std::initializer_list<Tensor> inputs, const Tensor& output);
}  // namespace fusion

}  // namespace octet
