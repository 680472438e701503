// Precision plans from the command line and plan files (`octet eval|export|sweep --pbatch`,
// tools/cli/quant_run.h):
//   --pbatch w=4,a=16      a uniform PrecisionBatching plan (quant::uniform_plan)
//   --pbatch plan.yaml     a plan file mapping module names (as in named_modules()) to precisions;
//                          `default:` covers every other quantizable layer but the final one:
//     scheme: paper                 # the quantization scheme of every entry (quant/pbatch.h): octet
//                                   # (the default) or paper (the reference code's); an entry may set its own
//     default: {w: 4, a: 16}        # PrecisionBatching: weight bits 1..8, activation bits 2..32
//     lstm: {w: 2, a: 16, clip: false, row_step: true}   # row_step: a weight step per output row
//     encoder: {w: 4, a: 8, scheme: paper, a_shift: 4}   # a_shift: the paper scheme's activation scale 2^-S
//     decoder: int8                 # the zero-point int8 inference baseline; `float` keeps a layer float
//   --pbatch w=4,a=8,scheme=paper[,row_step=1][,a_shift=6][,clip=0]   the same keys in a uniform plan
//   --int8                 int8 for every quantizable layer but the output layer
#pragma once

#include <optional>
#include <string>

#include "quant/precision.h"

namespace octet::cli {

// A plan file's text (YAML, as above) -> the plan; an Error naming `source`, the line and the key.
quant::PrecisionPlan precision_plan_from_yaml(const std::string& yaml, const std::string& source);
// --pbatch's argument: "w=N,a=K", or a plan file (a path ending in .yaml / .yml, or one that exists).
quant::PrecisionPlan precision_plan(const std::string& arg);
// The plan of the flags --pbatch ARG (empty: not given) and --int8: nullopt for neither, an Error
// for both.
std::optional<quant::PrecisionPlan> cli_plan(const std::string& pbatch, bool int8);

}  // namespace octet::cli
