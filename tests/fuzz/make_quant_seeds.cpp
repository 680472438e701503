// Writes the seed corpus of fuzz_quant_export: exports of the harness's model (quant_model.h) under
// several plans, as `octet export` writes them, each read back as the harness reads it and checked
// to give the converted model's logits (so the seeds reach the kernels).
//   build-fuzz/make_quant_seeds tests/fuzz/corpus/quant_export
#include <cstdio>
#include <string>
#include <vector>

#include "quant/precision.h"
#include "quant_model.h"
#include "tools/train/checkpoint.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_quant_seeds DIR\n");
    return 2;
  }
  using octet::quant::QuantSpec;
  const struct {
    const char* name;
    octet::quant::PrecisionPlan plan;
  } plans[] = {
      {"w4a16", octet::quant::uniform_plan(QuantSpec::pbatch(octet::quant::parse_pb_config("w=4,a=16", "seed")))},
      {"w1a8", octet::quant::uniform_plan(QuantSpec::pbatch(octet::quant::parse_pb_config("w=1,a=8", "seed")))},
      {"int8", octet::quant::uniform_plan(QuantSpec::int8())},
  };
  auto model = octet::fuzz::quant_model();
  for (const auto& p : plans) {
    octet::quant::PrecisionPlan plan = p.plan;
    plan.layers["decoder"] = QuantSpec::pbatch(octet::quant::parse_pb_config("w=8,a=8", "seed"));
    (void)octet::quant::convert_model(*model, plan);
    octet::NamedTensors tensors;
    std::string assignment;
    octet::quant::save_quant_state(*model, tensors, assignment);
    const std::string path = std::string(argv[1]) + "/" + p.name + ".safetensors";
    octet::train::save_checkpoint(path, model->state_dict(), {}, octet::train::TrainState{},
                                  "model:\n  name: lstm_lm\n", {}, {}, {}, tensors, assignment);
    octet::NoGradGuard no_grad;
    const std::vector<float> want = model->forward(octet::fuzz::quant_batch()).to_vector<float>();
    octet::quant::reset_to_float(*model);
    const octet::train::Checkpoint c = octet::train::load_checkpoint(path);
    (void)octet::quant::load_quant_state(*model, c.quant, c.quant_assignment, path);
    if (model->forward(octet::fuzz::quant_batch()).to_vector<float>() != want) {
      std::fprintf(stderr, "make_quant_seeds: %s reads back to other logits\n", path.c_str());
      return 1;
    }
    octet::quant::reset_to_float(*model);
    std::printf("%s: %s\n", path.c_str(),
                octet::quant::describe_layers(octet::quant::convert_model(*model, plan)).c_str());
    octet::quant::reset_to_float(*model);
  }
  return 0;
}
