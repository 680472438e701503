// `octet data get` / `octet data prepare imagenet` run as a user runs them (a separate process), and
// the recipe key data.download: every download goes to a local server on 127.0.0.1 (--mirror, or
// OCTET_DATA_MIRROR for a recipe), never the internet. Success against the real registry is not
// possible offline (its checksums are the real files'); tests/data/test_download.cpp covers it with
// the registry's entries pointed at generated files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "data/mnist.h"
#include "tests/data/imagenet_fixture.h"
#include "tests/data/local_server.h"
#include "tests/train/octet_process.h"
#include "tools/train/builders.h"

namespace octet::train {
namespace {

namespace fs = std::filesystem;
using octet::testing::LocalServer;
using octet::testing::TempDir;

// The four MNIST IDX files (3 images) in `dir`.
void write_mnist(const std::string& dir) {
  fs::create_directories(dir);
  for (const char* split : {"train", "t10k"}) {
    write_idx(dir + "/" + split + "-images-idx3-ubyte.gz", std::vector<uint8_t>(3 * 28 * 28, 5), {3, 28, 28});
    write_idx(dir + "/" + split + "-labels-idx1-ubyte.gz", {0, 1, 2}, {3});
  }
}

TEST(DataCommand, GetChecksPublishedChecksumsAndSaysWhatFailed) {
  TempDir www, data;
  write_mnist(www.path());  // generated files under the real names: not the published ones
  LocalServer server(www.path());
  OctetRun r = run_octet({"data", "get", "mnist", "--root", data.path() + "/m", "--mirror", server.url()});
  EXPECT_EQ(r.status, 1) << r.output;  // a command that failed
  expect_output(r, "checksum mismatch");
  expect_output(r, "expected f68b3c2dcbeaaa9fbdd348bbdeb94873 (the published one); the file was deleted");
  expect_output(r, "put the four IDX files");
  EXPECT_FALSE(fs::exists(data.path() + "/m/train-images-idx3-ubyte.gz"));
  EXPECT_FALSE(fs::exists(data.path() + "/m/train-images-idx3-ubyte.gz.part"));

  r = run_octet({"data", "get", "cifar10", "--root", data.path() + "/c", "--mirror", server.url()});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_output(r, server.url() + "/cifar-10-binary.tar.gz: HTTP 404");
  expect_output(r, "put it in " + data.path() + "/c (octet checks it and unpacks it)");

  write_mnist(data.path() + "/present");
  r = run_octet({"data", "get", "mnist", "--root", data.path() + "/present", "--mirror", server.url()});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "mnist is already in " + data.path() + "/present");
  r = run_octet({"data", "get", "imagenet"});
  EXPECT_EQ(r.status, 2) << r.output;
  expect_output(r, "octet data prepare imagenet");
}

TEST(DataCommand, PrepareImagenet) {
  octet::testing::Fixture f;
  const std::string root = f.dir.path() + "/imagenet";
  OctetRun r = run_octet({"data", "prepare", "imagenet", "--val-tar", f.val, "--devkit", f.devkit, "--root", root});
  EXPECT_EQ(r.status, 0) << r.output;
  expect_output(r, "5 validation images in " + root + "/val");
  EXPECT_TRUE(fs::exists(root + "/val/n01484850/" + octet::testing::val_name(4)));
  r = run_octet({"data", "prepare", "imagenet", "--val-tar", f.val});
  EXPECT_NE(r.status, 0);
  expect_output(r, "--devkit is required");
}

TEST(DataCommand, RecipeDataDownload) {
  TempDir www, data;
  LocalServer server(www.path());  // serves nothing: every file is a 404
  ::setenv("OCTET_DATA_MIRROR", server.url().c_str(), 1);
  // Present: opened as it is, no request made.
  write_mnist(data.path() + "/mnist");
  Recipe r =
      parse_recipe("", "test", {"data.dataset=mnist", "data.root=" + data.path() + "/mnist", "data.download=true"});
  EXPECT_EQ(build_datasets(r, true).train->size(), 3);
  EXPECT_EQ(server.requests(), "");
  // Missing: the run stops before its folder exists, naming the URL and where the files go.
  const std::string recipe = std::string(OCTET_TESTS_DIR) + "/../recipes/fashion_mnist.yaml";
  const OctetRun run = run_octet({"train", recipe, "data.dataset=cifar10", "data.root=" + data.path() + "/cifar",
                                  "data.download=true", "checkpoint.dir=" + data.path() + "/runs"});
  ::unsetenv("OCTET_DATA_MIRROR");
  EXPECT_EQ(run.status, 1) << run.output;
  expect_output(run, server.url() + "/cifar-10-binary.tar.gz: HTTP 404");
  expect_output(run, "data_batch_1.bin .. data_batch_5.bin");
  EXPECT_FALSE(fs::exists(data.path() + "/runs"));
  // What cannot be fetched says so.
  auto error_of = [](const Recipe& rc) -> std::string {
    try {
      build_datasets(rc, true);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(parse_recipe("", "test", {"data.dataset=image_folder", "data.download=true"}))
                .find("octet data prepare imagenet"),
            std::string::npos);
}

}  // namespace
}  // namespace octet::train
