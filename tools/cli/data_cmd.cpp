#include "tools/cli/data_cmd.h"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "data/fetch/download.h"
#include "data/fetch/imagenet.h"
#include "tools/train/fetch_data.h"
#include "tools/train/suggest.h"

namespace octet::cli {

void DataCommand::add(CLI::App& app) {
  cmd = app.add_subcommand("data", "datasets: download one, or prepare ImageNet's validation images");
  cmd->require_subcommand(1);
  std::string names;
  for (const DatasetSource& s : dataset_sources()) names += (names.empty() ? "" : ", ") + s.name;
  get = cmd->add_subcommand("get", "download, verify (published checksums) and unpack a dataset (" + names +
                                       "); a cut download resumes when run again");
  get->add_option("name", name, "the dataset: " + names)->required();
  get->add_option("--root", root, "the data folder (default: the one data.root defaults to, e.g. data/cifar10)");
  get->add_option("--mirror", mirror, "fetch the files from this URL (a local copy) instead of their public places");
  auto* prepare = cmd->add_subcommand("prepare", "arrange a dataset octet cannot download");
  prepare->require_subcommand(1);
  imagenet = prepare->add_subcommand(
      "imagenet",
      "sort ILSVRC2012's validation images into ROOT/val/<wnid>/ by the devkit's ground truth and meta.mat (the "
      "layout data.dataset image_folder reads; put the training images in ROOT/train/<wnid>/)");
  imagenet->add_option("--val-tar", val_tar, "ILSVRC2012_img_val.tar")->required();
  imagenet->add_option("--devkit", devkit, "ILSVRC2012_devkit_t12.tar.gz, or the folder it unpacks to")->required();
  imagenet->add_option("--root", root, "the data folder (default data/imagenet)");
}

namespace {

// The dataset `name` names (its folder's name too: fashion-mnist), else an error with the nearest.
const DatasetSource& source_named(const std::string& name) {
  try {
    return dataset_source(name);
  } catch (const UsageError& e) {
    std::vector<std::string> names;
    for (const DatasetSource& known : dataset_sources()) names.push_back(known.name);
    throw UsageError(e.what() + train::did_you_mean(name, names));
  }
}

}  // namespace

bool DataCommand::chosen() const { return cmd != nullptr && cmd->parsed(); }

int DataCommand::run() const {
  if (imagenet->parsed()) {
    const std::string dir = root.empty() ? "data/imagenet" : root;
    spdlog::info("sorting {} into {}/val/<wnid>/ ...", val_tar, dir);
    const int64_t n = prepare_imagenet_val(val_tar, devkit, dir);
    spdlog::info("{} validation images in {}/val (set data.root: {} with data.dataset: image_folder)", n, dir, dir);
    return 0;
  }
  const DatasetSource& s = source_named(name);
  const std::string dir = root.empty() ? s.root : root;
  if (!train::fetch_dataset(s, dir, mirror)) spdlog::info("{} is already in {}", s.name, dir);
  return 0;
}

}  // namespace octet::cli
