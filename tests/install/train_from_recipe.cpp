// Trains through the installed trainer library (octet::train), as a user's program would: the
// default recipe on a slice of Fashion-MNIST, then the same recipe with a model of the program's
// own, then a resume of the first run with one more epoch. Exits non-zero unless each run writes its
// checkpoint and learns something (far above 10% on the test slice).
// Usage: train_from_recipe RECIPE RUNS_DIR
#include <octet/octet.h>
#include <octet/train.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RECIPE RUNS_DIR\n", argv[0]);
    return 2;
  }
  using namespace octet;
  const std::vector<std::string> small = {"data.limit_train=2048",
                                          "data.limit_test=512",
                                          "train.epochs=1",
                                          "train.batch_size=64",
                                          "log.progress=false",
                                          "data.workers=0",
                                          std::string("checkpoint.dir=") + argv[2]};
  try {
    train::TrainResult a = train::Run::from_recipe(argv[1], small).fit();
    std::printf("recipe model: %s, %s\n", a.run_dir.c_str(), train::describe_eval(a.final_test).c_str());

    // The program's own model: an MLP on the 28x28 images.
    auto mlp = std::make_shared<Sequential>(
        std::initializer_list<std::shared_ptr<Module>>{std::make_shared<Flatten>(), std::make_shared<Linear>(784, 64),
                                                       std::make_shared<ReLU>(), std::make_shared<Linear>(64, 10)});
    std::vector<std::string> own = small;
    own.push_back("log.run_name=own_model");
    train::TrainResult b = train::Run::from_recipe(argv[1], own).model(mlp).fit();
    std::printf("own model: %s, %s\n", b.run_dir.c_str(), train::describe_eval(b.final_test).c_str());

    train::TrainResult c = train::Run::resume(a.run_dir, {"train.epochs=2"}).fit();
    std::printf("resumed: %s, %lld steps, %s\n", c.run_dir.c_str(), static_cast<long long>(c.steps),
                train::describe_eval(c.final_test).c_str());

    bool ok = a.final_test.top1 > 40 && b.final_test.top1 > 40 && c.final_test.top1 > 40 && c.steps == 2 * a.steps &&
              std::filesystem::exists(a.run_dir + "/last.safetensors") &&
              std::filesystem::exists(b.run_dir + "/last.safetensors");
    std::printf("trainer via find_package(octet): %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
