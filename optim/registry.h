// The optimizers by name, as a recipe's optimizer.name and `octet schema` know them: each one's
// options (declared once in its options struct, core/options.h) and how to make it. Adding an
// optimizer is one row here; adding one of its options is one line in its options struct.
//   const OptimizerKind& k = optimizer_kind("adamw");
//   auto opts = k.options();  opts->set("weight_decay", 0.05);
//   auto opt = k.make({ParamGroup(model->named_parameters())}, *opts, StateOptions());
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace octet {

struct OptimizerKind {
  const char* name;                                // optimizer.name
  std::unique_ptr<OptimizerOptions> (*options)();  // its options struct with their defaults
  std::unique_ptr<Optimizer> (*make)(std::vector<ParamGroup> groups, const OptimizerOptions& defaults,
                                     const StateOptions& state);
};

// Every optimizer, in the order the schema documents them.
const std::vector<OptimizerKind>& optimizer_kinds();
// The kind named `name`, or null.
const OptimizerKind* find_optimizer_kind(const std::string& name);

}  // namespace octet
