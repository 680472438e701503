// octet's trainer library (CMake target octet::train, header <octet/train.h>): recipes, the
// training loop behind `octet train` and `octet eval`, checkpoints, metrics. Start from run.h.
//   auto run = octet::train::Run::from_recipe("my.yaml", {"optimizer.lr=0.1"});
//   octet::train::TrainResult r = run.fit();
//   auto evals = octet::train::evaluate_checkpoint_splits(r.run_dir, "", 2);
#pragma once

#include "tools/train/checkpoint.h"
#include "tools/train/recipe.h"
#include "tools/train/run.h"
#include "tools/train/task.h"
#include "tools/train/trainer.h"
