// Every model: `#include "models/models.h"` brings in the architectures and the name registry.
//   auto net = build_model(ModelOptions().name("mobilenetv2_cifar").num_classes(10));
//   std::cout << net->summary();
#pragma once

#include "models/gpt.h"
#include "models/lstm_lm.h"
#include "models/mlp.h"
#include "models/mobilenetv2.h"
#include "models/registry.h"
#include "models/resnet.h"
#include "models/small_cnn.h"
