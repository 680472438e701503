// The `octet` command line. Subcommands arrive with their issues (train, eval, bench, inspect);
// `selftest` checks that the build works on this machine.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <exception>

#include "core/error.h"
#include "tools/selftest.h"

int main(int argc, char** argv) {
  CLI::App app{"octet: low-precision deep learning training"};
  app.require_subcommand(0, 1);
  int threads = 2;
  auto* selftest = app.add_subcommand("selftest", "run a tiny model forward/backward and check it");
  selftest->add_option("--threads", threads, "threads for CPU kernels")->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
  try {
    // Until recipes exist, selftest is the default job.
    return octet::tools::run_selftest(threads);
  } catch (const octet::Error& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
}
