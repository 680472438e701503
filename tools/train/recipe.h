// Recipes: YAML files that describe one experiment (model, data, optimizer, schedule, training,
// checkpoints, logging). Every key has a type and a default in one schema table (recipe.cpp),
// which recipes/README.md documents; an unknown key, a wrong type or a bad value is an
// octet::Error naming the file, the line and the key. Any key can be overridden from the
// command line as `section.key=value` (the value is parsed as YAML). optimizer.param_groups gives
// parameters matching a name glob their own optimizer keys (PyTorch's parameter groups):
//   optimizer: {weight_decay: 0.05, param_groups: [{params: "*.bias", weight_decay: 0}]}
//   Recipe r = load_recipe("recipes/fashion_mnist.yaml", {"optimizer.lr=0.05"});
//   double lr = r.real("optimizer.lr");   std::string yaml = r.resolved_yaml();
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/options.h"

namespace octet::train {

enum class KeyType { integer, real, boolean, text, real_list, int_list, text_list, group_list };

struct SchemaEntry {
  std::string key;  // "section.name"
  KeyType type;
  std::string default_yaml;  // the default, as YAML
  std::string doc;
  // A key of the optimizer's options: no default of its own (default_yaml is empty); unset, it takes
  // the default of the chosen optimizer's options struct (optimizer_defaults()).
  bool from_optimizer = false;
  // A model key that follows the dataset's images (dataset_defaults()) where the recipe leaves it
  // unset; default_yaml is its value for a dataset of another kind (a language model's text).
  bool from_dataset = false;
  // The values allowed beyond the type (convert() checks them, so a bad value is named by its key
  // and line before anything is built): numbers in a range, or a text among choices.
  OptionRange range{};
};

// The whole schema, in documentation order.
const std::vector<SchemaEntry>& recipe_schema();
// recipes/README.md's key table, generated from the schema.
std::string schema_markdown();

struct ParamGroupSpec;
using RecipeValue = std::variant<int64_t, double, bool, std::string, std::vector<double>, std::vector<int64_t>,
                                 std::vector<std::string>, std::vector<ParamGroupSpec>>;

// One entry of optimizer.param_groups (a group_list key): the parameters it selects, by name globs
// ('*' matches any run of characters, as in optimizer.keep_32bit), and the optimizer keys it sets
// for them, without "optimizer." ("lr", "weight_decay", "state_bits", ...), each of the key's type.
// The keys it does not set take the section's values.
struct ParamGroupSpec {
  std::vector<std::string> params;
  std::map<std::string, RecipeValue> values;
  bool operator==(const ParamGroupSpec&) const = default;
};

// Each optimizer's defaults for the recipe keys it uses (without "optimizer."), read from its options
// struct default-constructed (SGDOptions, AdamOptions, ...): the one source of those defaults.
struct OptimizerDefaults {
  std::string name;  // optimizer.name
  std::map<std::string, RecipeValue> values;
};
const std::vector<OptimizerDefaults>& optimizer_defaults();

// Each image dataset's defaults for the recipe keys that follow it: data.root, data.mean and data.std
// where the recipe leaves them empty, model.in_channels and model.image_size where it leaves them
// unset (image_size 0: the crop, data.image_size).
struct DatasetDefaults {
  std::string name, root;
  std::vector<float> mean, std;
  int64_t in_channels = 0, image_size = 0;
};
// The defaults of data.dataset `name`; null for a dataset that is not one of images.
const DatasetDefaults* dataset_defaults(const std::string& name);

class Recipe {
 public:
  int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;
  bool boolean(const std::string& key) const;
  const std::string& text(const std::string& key) const;
  const std::vector<double>& real_list(const std::string& key) const;
  const std::vector<int64_t>& int_list(const std::string& key) const;
  const std::vector<std::string>& text_list(const std::string& key) const;
  const std::vector<ParamGroupSpec>& group_list(const std::string& key) const;
  // Whether the recipe (or an override) set the key, as opposed to the schema default.
  bool is_set(const std::string& key) const;
  // The key as errors that involve it name it: "recipes/x.yaml:12: recipe optimizer.nesterov" where
  // the file sets it, else "recipe optimizer.nesterov" (an override or a default).
  std::string where(const std::string& key) const;

  // Every key with its value, as YAML: saved into run folders and checkpoints.
  std::string resolved_yaml() const;
  // One key's value, as YAML ("0.05", "\"small_cnn\"", "[0.9, 0.999]").
  std::string value_yaml(const std::string& key) const;
  const std::string& source() const { return source_; }  // file path, or "<string>"

 private:
  friend Recipe parse_recipe(const std::string&, const std::string&, const std::vector<std::string>&);
  friend Recipe parse_stored_recipe(const std::string&, const std::string&, const std::vector<std::string>&);
  // parse_recipe and parse_stored_recipe in one.
  static Recipe parse(const std::string& yaml, const std::string& source, const std::vector<std::string>& overrides,
                      bool stored);
  const RecipeValue& value(const std::string& key, KeyType want) const;
  void check_combinations(const OptimizerDefaults& chosen);
  std::map<std::string, RecipeValue> values_;
  std::map<std::string, std::string> set_;  // key -> "file:line" of its value ("" for an override)
  std::string source_;
};

// The keys a resumed run keeps as its checkpoint has them: they shape the model's weights (model.*
// but model.dropout) and the optimizer's state (its name and the state's precision).
const std::vector<std::string>& keys_fixed_on_resume();
// The first of `keys` whose value `changed` (a stored recipe with overrides) gives otherwise than
// `stored`, or "" when none does.
std::string first_changed(const Recipe& stored, const Recipe& changed, const std::vector<std::string>& keys);

// Parses YAML text; `source` names it in errors. Overrides are "a.b=value" strings.
Recipe parse_recipe(const std::string& yaml, const std::string& source, const std::vector<std::string>& overrides = {});
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides = {});
// A checkpoint's stored (resolved) recipe: as parse_recipe, except that the checks of what a recipe
// may not combine are left out (a resolved recipe names every key, those its optimizer does not use
// too).
Recipe parse_stored_recipe(const std::string& yaml, const std::string& source,
                           const std::vector<std::string>& overrides = {});

}  // namespace octet::train
