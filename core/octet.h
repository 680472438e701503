// octet's public umbrella header: `#include <octet/octet.h>` brings in the whole C++ API
// (core, layers and models).
//   octet::Tensor x = octet::randn({4, 8}, octet::TensorOptions().requires_grad(true));
//   octet::sum(octet::relu(x)).backward();
#pragma once

#include "core/allocator.h"
#include "core/autograd.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/conv.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/loss.h"
#include "core/ops/nn.h"
#include "core/ops/pool.h"
#include "core/ops/reduce.h"
#include "core/parallel.h"
#include "core/serialization.h"
#include "core/tensor.h"
#include "data/data.h"
#include "layers/layers.h"
#include "models/models.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "quant/int8_model.h"
