// The recipe's optimizer keys and the optimizers' options structs cannot disagree: with nothing set,
// a recipe builds each optimizer with exactly its options struct's defaults (the schema has none of
// its own), and every key the optimizer uses reaches its field.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <variant>

#include "core/octet.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"
#include "tools/train/builders.h"
#include "tools/train/recipe.h"

namespace octet::train {
namespace {

using Values = std::map<std::string, RecipeValue>;

std::vector<double> pair(std::pair<double, double> b) { return {b.first, b.second}; }

// Adam's and AdamW's options (the same fields).
template <typename Options>
Values adam_like(const Options& x) {
  return {{"lr", x.lr_},
          {"betas", pair(x.betas_)},
          {"eps", x.eps_},
          {"weight_decay", x.weight_decay_},
          {"amsgrad", x.amsgrad_}};
}

// The options an optimizer was built with, under the recipe's key names: written here by hand,
// independently of the schema's table, so a key wired to the wrong field shows.
Values options_of(const Optimizer& opt) {
  if (auto* o = dynamic_cast<const SGD*>(&opt)) {
    const SGDOptions& x = o->options(0);
    return {{"lr", x.lr_},
            {"momentum", x.momentum_},
            {"dampening", x.dampening_},
            {"nesterov", x.nesterov_},
            {"weight_decay", x.weight_decay_}};
  }
  if (auto* o = dynamic_cast<const Adam*>(&opt)) return adam_like(o->options(0));
  if (auto* o = dynamic_cast<const AdamW*>(&opt)) return adam_like(o->options(0));
  if (auto* o = dynamic_cast<const RMSprop*>(&opt)) {
    const RMSpropOptions& x = o->options(0);
    return {{"lr", x.lr_},
            {"alpha", x.alpha_},
            {"eps", x.eps_},
            {"weight_decay", x.weight_decay_},
            {"momentum", x.momentum_},
            {"centered", x.centered_}};
  }
  if (auto* o = dynamic_cast<const Adagrad*>(&opt)) {
    const AdagradOptions& x = o->options(0);
    return {{"lr", x.lr_},
            {"lr_decay", x.lr_decay_},
            {"weight_decay", x.weight_decay_},
            {"initial_accumulator_value", x.initial_accumulator_value_},
            {"eps", x.eps_}};
  }
  if (auto* o = dynamic_cast<const Lion*>(&opt)) {
    const LionOptions& x = o->options(0);
    return {{"lr", x.lr_}, {"betas", pair(x.betas_)}, {"weight_decay", x.weight_decay_}};
  }
  if (auto* o = dynamic_cast<const Lamb*>(&opt)) {
    const LambOptions& x = o->options(0);
    return {{"lr", x.lr_},
            {"betas", pair(x.betas_)},
            {"eps", x.eps_},
            {"weight_decay", x.weight_decay_},
            {"trust_clip", x.trust_clip_},
            {"layer_adaptation", x.layer_adaptation_}};
  }
  if (auto* o = dynamic_cast<const Lars*>(&opt)) {
    const LarsOptions& x = o->options(0);
    return {{"lr", x.lr_},
            {"momentum", x.momentum_},
            {"weight_decay", x.weight_decay_},
            {"trust_coefficient", x.trust_coefficient_},
            {"eps", x.eps_},
            {"layer_adaptation", x.layer_adaptation_}};
  }
  ADD_FAILURE() << "an optimizer this test does not know";
  return {};
}

std::unique_ptr<Optimizer> build(const std::string& name, std::vector<std::string> overrides = {}) {
  static Tensor w = zeros({8});
  overrides.push_back("optimizer.name=" + name);
  return build_optimizer(parse_recipe("", "r.yaml", overrides), {{"w", w}});
}

// A value of the same type that differs from v, as a YAML override.
std::string changed(const RecipeValue& v) {
  std::ostringstream os;
  os.precision(17);
  if (const bool* b = std::get_if<bool>(&v)) {
    os << (*b ? "false" : "true");
  } else if (const double* d = std::get_if<double>(&v)) {
    os << *d * 0.5 + 0.03125;
  } else {
    const auto& l = std::get<std::vector<double>>(v);
    os << '[' << l[0] * 0.5 << ", " << l[1] * 0.5 << ']';
  }
  return os.str();
}

TEST(OptimizerKeys, UnsetKeysAreTheOptionsStructDefaults) {
  ASSERT_EQ(optimizer_defaults().size(), 8u);
  for (const OptimizerDefaults& o : optimizer_defaults()) {
    SCOPED_TRACE(o.name);
    EXPECT_EQ(options_of(*build(o.name)), o.values);
  }
  // The defaults that used to drift between the recipe and the C++ API.
  EXPECT_EQ(options_of(*build("lion"))["betas"], RecipeValue(std::vector<double>{0.9, 0.99}));
  EXPECT_EQ(options_of(*build("lamb"))["eps"], RecipeValue(1e-6));
  EXPECT_EQ(options_of(*build("sgd"))["momentum"], RecipeValue(0.0));
  EXPECT_EQ(options_of(*build("adamw"))["weight_decay"], RecipeValue(1e-2));
}

TEST(OptimizerKeys, EveryKeyReachesItsField) {
  for (const OptimizerDefaults& o : optimizer_defaults()) {
    for (const auto& [key, value] : o.values) {
      SCOPED_TRACE(o.name + " optimizer." + key);
      const std::string text = changed(value);
      std::vector<std::string> set = {"optimizer." + key + "=" + text};
      // Nesterov momentum needs momentum: set with it, and momentum is not compared below.
      const std::string companion = key == "nesterov" ? "momentum" : "";
      if (!companion.empty()) set.push_back("optimizer.momentum=0.9");
      const Values got = options_of(*build(o.name, set));
      std::vector<std::string> named = set;  // the key is one this optimizer uses (others are errors)
      named.push_back("optimizer.name=" + o.name);
      const Recipe r = parse_recipe("", "r.yaml", named);
      const std::string full = "optimizer." + key;
      const RecipeValue want = std::holds_alternative<bool>(value)     ? RecipeValue(r.boolean(full))
                               : std::holds_alternative<double>(value) ? RecipeValue(r.real(full))
                                                                       : RecipeValue(r.real_list(full));
      EXPECT_NE(want, value);
      EXPECT_EQ(got.at(key), want);
      for (const auto& [k, v] : o.values) {
        if (k != key && k != companion) {
          EXPECT_EQ(got.at(k), v) << "optimizer." << k << " changed too";
        }
      }
    }
  }
}

TEST(OptimizerKeys, SchemaAndReadme) {
  // Every optimizer key without a default of its own is some optimizer's, and the reverse.
  std::set<std::string> from_schema, from_optimizers;
  for (const SchemaEntry& e : recipe_schema())
    if (e.from_optimizer) {
      EXPECT_TRUE(e.default_yaml.empty()) << e.key;
      from_schema.insert(e.key.substr(std::string("optimizer.").size()));
    }
  for (const OptimizerDefaults& o : optimizer_defaults())
    for (const auto& [k, v] : o.values) from_optimizers.insert(k);
  EXPECT_EQ(from_schema, from_optimizers);
  // The resolved recipe names the values used, so a checkpoint resumes with them.
  const Recipe lamb = parse_recipe("optimizer:\n  name: lamb\n", "r.yaml");
  EXPECT_NE(lamb.resolved_yaml().find("eps: 1e-06"), std::string::npos) << lamb.resolved_yaml();
  EXPECT_FALSE(lamb.is_set("optimizer.eps"));
  EXPECT_NE(schema_markdown().find("lamb: 1e-06"), std::string::npos);
  try {
    parse_recipe("optimizer:\n  name: adamax\n", "r.yaml");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown optimizer 'adamax' (known: sgd, adam, adamw"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace octet::train
