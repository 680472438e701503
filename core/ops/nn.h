// The neural-network building blocks together, one header per op family:
//   core/ops/index.h    gather, embedding           core/ops/concat.h  cat, stack
//   core/ops/dropout.h  dropout (sharded masks)     core/ops/norm.h    layer_norm, batch_norm
//   core/ops/rnn.h      lstm_cell, lstm_layer
// Include the family's header where one is enough.
#pragma once

#include "core/ops/concat.h"
#include "core/ops/dropout.h"
#include "core/ops/index.h"
#include "core/ops/norm.h"
#include "core/ops/rnn.h"
