// Turning a recipe into objects: the model, the datasets with their transforms, the optimizer and
// the learning-rate schedule. Semantic checks on values (lr > 0, a known optimizer name, data
// present) happen here, with errors that name the recipe key.
#pragma once

#include <memory>

#include "data/dataset.h"
#include "layers/module.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "quant/int8_model.h"
#include "tools/train/recipe.h"

namespace octet::train {

// `vocab_size`: a language model's vocabulary (from its corpus or checkpoint: tools/train/task.h).
std::shared_ptr<Module> build_model_from(const Recipe& r, int64_t vocab_size = 0);

struct Datasets {
  std::shared_ptr<Dataset> train, test;
};
// `root_override` (from `octet eval --data`) replaces data.root when non-empty.
// With `need_train` false only the test split is opened.
Datasets build_datasets(const Recipe& r, bool need_train, const std::string& root_override = "");

// The recipe's optimizer over `params`; `model` (if given) lets param_groups name its embeddings
// with the selector @embedding.
std::unique_ptr<Optimizer> build_optimizer(const Recipe& r, const NamedTensors& params, const Module* model = nullptr);
// With schedule.name plateau, `plateau` (if given) receives the PlateauSchedule inside the result,
// for the trainer to feed evaluation losses to; otherwise it is set to null.
std::shared_ptr<LrSchedule> build_schedule(const Recipe& r, std::shared_ptr<PlateauSchedule>* plateau = nullptr);

// The quant.* keys as an INT8 layer configuration.
quant::Int8Config int8_config_from(const Recipe& r);
// With quant.int8_conv, turns the model's convolutions INT8 (quant::enable_int8, seeded from
// train.seed), with quant.int8_linear its Linear layers (quant::enable_int8_linear), and returns
// them (convolutions first); without either, nothing. A model it cannot convert is an Error naming
// the key.
std::vector<quant::Int8Module> build_int8(const Recipe& r, Module& model);

}  // namespace octet::train
