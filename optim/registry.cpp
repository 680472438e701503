// The optimizer registry (optim/registry.h).
#include "optim/registry.h"

#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"

namespace octet {
namespace {

template <typename Options>
std::unique_ptr<OptimizerOptions> options_of() {
  return std::make_unique<Options>();
}

template <typename Opt, typename Options>
std::unique_ptr<Optimizer> make(std::vector<ParamGroup> groups, const OptimizerOptions& defaults,
                                const StateOptions& state) {
  const auto* options = dynamic_cast<const Options*>(&defaults);
  OCTET_CHECK(options != nullptr, "optimizer registry: options of another optimizer kind");
  return std::make_unique<Opt>(std::move(groups), *options, state);
}

template <typename Opt, typename Options>
OptimizerKind kind(const char* name) {
  return {name, options_of<Options>, make<Opt, Options>};
}

}  // namespace

const std::vector<OptimizerKind>& optimizer_kinds() {
  static const std::vector<OptimizerKind> kinds = {
      kind<SGD, SGDOptions>("sgd"),
      kind<Adam, AdamOptions>("adam"),
      kind<AdamW, AdamWOptions>("adamw"),
      kind<RMSprop, RMSpropOptions>("rmsprop"),
      kind<Adagrad, AdagradOptions>("adagrad"),
      kind<Lion, LionOptions>("lion"),
      kind<Lamb, LambOptions>("lamb"),
      kind<Lars, LarsOptions>("lars"),
  };
  return kinds;
}

const OptimizerKind* find_optimizer_kind(const std::string& name) {
  for (const OptimizerKind& k : optimizer_kinds())
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace octet
