// Datasets octet fetches itself (torchvision's download=True): CIFAR-10 (binary version), MNIST,
// Fashion-MNIST, WikiText-2 and WikiText-103, from their usual public locations, each file checked
// against its published checksum. A download goes to FILE.part and resumes from it (HTTP Range)
// after a cut connection, in the same call or the next; a file is renamed to its name only once its
// checksum is right; a wrong checksum deletes the file and says so; a failed write (a full disk)
// deletes the part file; archives are unpacked file by file, each written atomically. An archive
// put in the folder by hand is checked and unpacked like a downloaded one.
//   download_dataset(dataset_source("cifar10"), "data/cifar10");        // fetch what is missing
//   DownloadOptions o;  o.mirror = "http://127.0.0.1:8000";             // a local copy of the files
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/fetch/hash.h"

namespace octet {

struct RemoteFile {
  std::string name;               // its name in the data folder (the archive's, before unpacking)
  std::vector<std::string> urls;  // its public locations, tried in order
  HashKind hash = HashKind::md5;
  std::string checksum;  // the published digest, lower-case hex
  bool unpack = false;   // an archive whose files go into the data folder (it stays beside them)
  std::string strip;     // a leading folder of the archive's paths dropped when unpacking
};

struct DatasetSource {
  std::string name;  // as `octet data get NAME` takes it
  std::string root;  // the default data folder
  std::vector<RemoteFile> files;
  // Paths under the data folder whose presence means the dataset is there; "a|b" is either.
  std::vector<std::string> present;
  // What else a user can do by hand, after "or " ("ROOT" stands for the data folder).
  std::string manual;
};

// The built-in registry (URLs and checksums with their sources are in download.cpp).
const std::vector<DatasetSource>& dataset_sources();
// The source named `name` (an octet::Error listing the known names otherwise).
const DatasetSource& dataset_source(const std::string& name);

struct DownloadOptions {
  // Non-empty: every file is fetched from MIRROR/NAME instead of its public locations (a local copy,
  // or a test's server). Defaults to the environment variable OCTET_DATA_MIRROR.
  std::string mirror;
  int retries = 3;              // resumed tries of one location after a cut connection
  long connect_timeout_s = 30;  // giving up on a location that does not answer
  long stall_timeout_s = 60;    // giving up on a transfer that moves no byte for this long
  // Called as bytes arrive: the file's name, bytes done and its total (0: unknown).
  std::function<void(const std::string& file, uint64_t done, uint64_t total)> progress;
  // What was done, one line each: downloaded, verified, unpacked, deleted.
  std::function<void(const std::string& line)> log;
};

// Whether everything `s.present` names is under `root`.
bool dataset_present(const DatasetSource& s, const std::string& root);

// Fetches, verifies and unpacks what is missing of `s` into `root` (created if needed). Returns
// false when the dataset was already there (no network used). Every failure is an octet::Error that
// names the URL and why, and says where to put the file by hand.
bool download_dataset(const DatasetSource& s, const std::string& root, DownloadOptions opts = {});

// One file to `path`, through `path`.part, from each of `urls` in turn until one gives the file with
// the right checksum. A file already at `path` is checked first (deleted when wrong).
void download_file(const RemoteFile& f, const std::string& path, const DownloadOptions& opts);

}  // namespace octet
