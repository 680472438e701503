// `octet data`: datasets on disk.
//   octet data get NAME [--root DIR] [--mirror URL]     fetch, verify and unpack CIFAR-10 (cifar10),
//       MNIST (mnist), Fashion-MNIST (fashion_mnist), WikiText-2 (wikitext2) or WikiText-103
//       (wikitext103) into DIR (default: the folder a recipe's data.root defaults to)
//   octet data prepare imagenet --val-tar ILSVRC2012_img_val.tar --devkit ILSVRC2012_devkit_t12.tar.gz
//       [--root data/imagenet]                           sort the validation images into class folders
// The recipe key data.download does what `data get` does before a run opens its data.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace octet::cli {

struct DataCommand {
  CLI::App* cmd = nullptr;
  CLI::App* get = nullptr;
  CLI::App* imagenet = nullptr;
  std::string name, root, mirror, val_tar, devkit;

  void add(CLI::App& app);
  bool chosen() const;
  int run() const;
};

}  // namespace octet::cli
