// data.download (and `octet data get`): a dataset fetched, verified and unpacked before it is opened
// (data/fetch/download.h), with a progress bar of bytes, rate and ETA on a terminal and a log line per
// step (downloaded, unpacked, deleted).
//   std::string root = download_for_recipe(r, "cifar10", "data/cifar10", /*root_is_default=*/true);
#pragma once

#include <string>

#include "data/fetch/download.h"
#include "tools/train/recipe.h"

namespace octet::train {

// Fetches what is missing of `s` into `root`; false when it was all there. `mirror` as
// DownloadOptions::mirror.
bool fetch_dataset(const DatasetSource& s, const std::string& root, const std::string& mirror = "");

// For data.dataset `dataset` read from `root`, when the recipe sets data.download: fetches it and
// returns the folder to read (Fashion-MNIST's default, the Debian package's folder, becomes
// data/fashion-mnist when the package is not installed). A text corpus is chosen by the folder's
// name (wikitext-2 or wikitext-103); image_folder (ImageNet) is an error that names
// `octet data prepare imagenet`; toy_grammar needs nothing. Without data.download, returns `root`.
std::string download_for_recipe(const Recipe& r, const std::string& dataset, const std::string& root,
                                bool root_is_default);

}  // namespace octet::train
