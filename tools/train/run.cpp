#include "tools/train/run.h"

#include "core/error.h"

namespace octet::train {

Run Run::from_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  return Run(load_recipe(path, overrides), {});
}

Run Run::from_yaml(const std::string& yaml, const std::vector<std::string>& overrides, const std::string& source) {
  return Run(parse_recipe(yaml, source, overrides), {});
}

Run Run::resume(const std::string& run_or_checkpoint, const std::vector<std::string>& overrides) {
  OCTET_CHECK(!run_or_checkpoint.empty(), "Run::resume: expected a run folder or checkpoint, got an empty path");
  TrainOptions opts;
  opts.resume = run_or_checkpoint;
  opts.overrides = overrides;
  return Run(Recipe(), std::move(opts));  // train() reads the recipe from the checkpoint
}

Run& Run::model(std::shared_ptr<Module> m) {
  OCTET_CHECK(m != nullptr, "Run::model: expected a model, got null");
  opts_.model = std::move(m);
  return *this;
}

Run& Run::stop_when(const std::atomic<bool>* flag) {
  opts_.stop = flag;
  return *this;
}

Run& Run::distributed(bool on) {
  opts_.distributed = on;
  return *this;
}

TrainResult Run::fit() { return train(recipe_, opts_); }

}  // namespace octet::train
