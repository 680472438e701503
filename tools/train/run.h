// A training run from C++: what `octet train` does, for a recipe file, a recipe in a string or a
// run to resume, with the recipe's model or one of your own. The run gets everything the CLI's
// gets: a run folder, checkpoints and exact resume, metrics.jsonl and curves.html, the progress bar,
// INT8 training and 8-bit optimizers as the recipe says.
//   auto run = octet::train::Run::from_recipe("my.yaml", {"optimizer.lr=0.1"});
//   octet::train::TrainResult r = run.fit();          // r.run_dir, r.final_test.top1, ...
//   Run::from_recipe("my.yaml").model(std::make_shared<MyNet>()).fit();   // your Module, the recipe's data
//   Run::resume(r.run_dir, {"train.epochs=20"}).fit();                     // continue, bit for bit
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"
#include "tools/train/recipe.h"
#include "tools/train/trainer.h"

namespace octet::train {

class Run {
 public:
  // A new run from a recipe file (recipes/README.md) with command-line style overrides.
  static Run from_recipe(const std::string& path, const std::vector<std::string>& overrides = {});
  // A new run from recipe YAML text; `source` names it in errors.
  static Run from_yaml(const std::string& yaml, const std::vector<std::string>& overrides = {},
                       const std::string& source = "<string>");
  // Continues a run folder or checkpoint with its stored recipe (overrides on top, e.g. more epochs).
  static Run resume(const std::string& run_or_checkpoint, const std::vector<std::string>& overrides = {});

  // Trains `m` instead of the recipe's model.* (see TrainOptions::model).
  Run& model(std::shared_ptr<Module> m);
  // Checked at every step: when it becomes true, the run saves last.safetensors and returns.
  Run& stop_when(const std::atomic<bool>* flag);
  // Launched as several processes (mpirun): true (the default) trains one data-parallel run over
  // them; false trains this process alone (see TrainOptions::distributed).
  Run& distributed(bool on);

  // The recipe a new run trains with (a resumed run reads its own from the checkpoint).
  const Recipe& recipe() const { return recipe_; }
  // Trains to the end (or to a stop), evaluates, and returns where and how it ended.
  TrainResult fit();

 private:
  Run(Recipe recipe, TrainOptions opts) : recipe_(std::move(recipe)), opts_(std::move(opts)) {}
  Recipe recipe_;
  TrainOptions opts_;
};

}  // namespace octet::train
