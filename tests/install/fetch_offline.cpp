// Uses the installed dataset-fetching library (octet::fetch, <octet/fetch.h>) offline, as a user's
// program would: the registry knows CIFAR-10's archive and its checksum, an empty folder holds no
// dataset, and MD5 gives RFC 1321's digest of "abc". Exits non-zero otherwise.
#include <octet/fetch.h>

#include <cstdio>
#include <filesystem>

int main() {
  using namespace octet;
  const DatasetSource& cifar = dataset_source("cifar10");
  Digest md5(HashKind::md5);
  md5.update("abc", 3);
  const std::string empty = (std::filesystem::temp_directory_path() / "octet_fetch_offline_empty").string();
  std::filesystem::create_directories(empty);
  bool ok = !cifar.files.empty() && cifar.files[0].checksum.size() == 32 && !dataset_present(cifar, empty) &&
            md5.hex() == "900150983cd24fb0d6963f7d28e17f72";
  std::filesystem::remove(empty);
  std::printf("octet::fetch via find_package(octet): %s\n", ok ? "registry and MD5 correct" : "WRONG");
  return ok ? 0 : 1;
}
