// Per-layer precision for quantized inference: a plan says which Linear and LSTM layers of a model
// run PrecisionBatching at which (w, a) bits, run the int8 baseline, or stay float; convert_model
// applies it in place through Linear::set_inference / LSTM::set_inference (layers/quantized.h).
// A uniform plan ("w=4,a=16", or int8) converts every LSTM and Linear except the model's final
// output layer (its last Linear, when no other quantizable layer follows it), which stays float as
// the PrecisionBatching paper's LM keeps its decoder; a per-layer plan (tools/cli/quant_run.h reads it
// from YAML) names layers as in named_modules() and may convert the final layer too.
// The preprocessed weights of a converted model travel in a file (save_quant_state) and come back
// without preprocessing (load_quant_state).
//   auto spec = quant::QuantSpec::pbatch(quant::parse_pb_config("w=4,a=16", "--pbatch"));   // or
//   "w=4,a=8,scheme=paper" auto layers = quant::convert_model(*model, quant::uniform_plan(spec));   // lstm: w4a16,
//   decoder: float model->eval();  NoGradGuard ng;  Tensor y = (*model)(x);
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/serialization.h"
#include "layers/module.h"
#include "quant/qmatmul.h"

namespace octet::quant {

// "w=4,a=16" (any order, spaces allowed; clip=0 turns the clip search off, scheme=paper|octet picks the
// quantization scheme of quant/pbatch.h, row_step=1 a weight step per row, a_shift=S the paper scheme's
// activation scale 2^-S) -> a checked PbConfig; an Error naming `what` (e.g. "--pbatch") and the text
// otherwise.
PbConfig parse_pb_config(const std::string& text, const std::string& what);
// "paper" or "octet" -> the scheme; an Error naming `what` otherwise.
PbScheme parse_pb_scheme(const std::string& text, const std::string& what);

// nullopt: float.
using LayerPrecision = std::optional<QuantSpec>;
std::string precision_name(const LayerPrecision& p);  // "w4a16", "int8" or "float"

struct PrecisionPlan {
  std::map<std::string, LayerPrecision> layers;  // by module name (named_modules())
  LayerPrecision default_spec;                   // every other quantizable layer but the final one
  std::string source;                            // where the plan came from, for errors
};
// Every quantizable layer but the final one at `spec`.
PrecisionPlan uniform_plan(const QuantSpec& spec, const std::string& source = "");

struct ConvertedLayer {
  std::string name;  // as in named_modules()
  std::string type;  // "Linear" or "LSTM"
  LayerPrecision precision;
};

// The quantizable layers of `model` (Linear, LSTM) in named_modules() order, with their current
// precision, and the name of its final output layer ("" when the last one is an LSTM).
std::vector<ConvertedLayer> quantizable_layers(const Module& model);
std::string final_layer_name(const Module& model);

// Sets (or clears) every quantizable layer's inference hook as `plan` says; returns every
// quantizable layer with its precision. Convert after loading the weights: the quantized layers
// hold preprocessed copies. An Error for a plan naming a layer that is not a quantizable layer of
// the model (the message lists them) or a plan that quantizes nothing.
std::vector<ConvertedLayer> convert_model(Module& model, const PrecisionPlan& plan);
// Every quantizable layer back to float (the hooks cleared).
void reset_to_float(Module& model);
// "lstm: w4a16, decoder: float"
std::string describe_layers(const std::vector<ConvertedLayer>& layers);

// The preprocessed weights of every converted layer: tensors "<layer>.<matrix>.planes" / ".step"
// (PrecisionBatching) or ".codes" / ".row_sums" / ".scale" (int8), <matrix> "weight" or
// "weight_ih_l<k>" / "weight_hh_l<k>"; and the assignment as text, one "<layer> <type> <precision>"
// per line.
void save_quant_state(const Module& model, NamedTensors& tensors, std::string& assignment);
// The inverse: converts `model` (its weights loaded) from the stored data without preprocessing.
// Everything is checked (layer names and types, precisions, every tensor's dtype and shape, no tensor
// left over): an Error naming `what` (the file) otherwise.
std::vector<ConvertedLayer> load_quant_state(Module& model, const NamedTensors& tensors, const std::string& assignment,
                                             const std::string& what);

}  // namespace octet::quant
