// Every layer: `#include "layers/layers.h"` brings in Module and the building blocks.
//   auto net = std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
//       std::make_shared<Conv2d>(1, 8, 3), std::make_shared<ReLU>(), std::make_shared<Flatten>()});
#pragma once

#include "layers/activation.h"
#include "layers/add.h"
#include "layers/attention.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/distributed.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/fusion.h"
#include "layers/init.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "layers/module.h"
#include "layers/pooling.h"
#include "layers/quantized.h"
#include "layers/sequential.h"
#include "layers/shape.h"
