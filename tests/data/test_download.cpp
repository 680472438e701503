// The dataset downloader (data/fetch/download.h) against a local HTTP server on 127.0.0.1 serving archives
// generated here in the real layouts: success (CIFAR-10's tar.gz, MNIST's gzipped IDX files,
// WikiText's zip), resume after a cut connection, a bad checksum, a missing file, a 404, no
// network, a full disk. Never touches the internet: every source points at the local server.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>

#include "core/octet.h"
#include "data/data.h"
#include "data/fetch/archive.h"
#include "data/fetch/download.h"
#include "data/fetch/hash.h"
#include "data/file_io.h"
#include "local_server.h"
#include "temp_dir.h"
#include "tests/error_of.h"

namespace octet {
namespace {

namespace fs = std::filesystem;
using testing::LocalServer;
using testing::read_text;
using testing::TempDir;
using testing::write_archive;

using testing::error_of;

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

std::string md5_of(const std::string& path) { return file_digest(HashKind::md5, path); }

// A CIFAR-10 binary archive: 2 records per batch, labels 0..9 cycling, pseudo-random pixels (so that
// the archive does not compress to almost nothing: about 37 KB).
std::string write_cifar_archive(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> files;
  int label = 0;
  uint32_t state = 1;
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                           "data_batch_5.bin", "test_batch.bin"}) {
    std::string bytes;
    for (int r = 0; r < 2; ++r) {
      bytes += static_cast<char>(label++ % 10);
      for (int i = 0; i < 3072; ++i) bytes += static_cast<char>((state = state * 1664525u + 1013904223u) >> 24);
    }
    files.emplace_back(std::string("cifar-10-batches-bin/") + name, bytes);
  }
  files.emplace_back("cifar-10-batches-bin/batches.meta.txt", "airplane\nautomobile\n");
  write_archive(path, files);
  return md5_of(path);
}

// The registry's entry for `name` with its files served by `server` and checksummed from `dir`.
DatasetSource served(const std::string& name, const LocalServer& server, const std::string& dir) {
  DatasetSource s = dataset_source(name);
  for (RemoteFile& f : s.files) {
    f.urls = {server.url() + "/" + f.name};
    f.checksum = md5_of(dir + "/" + f.name);
  }
  return s;
}

TEST(DataHash, KnownVectors) {
  // RFC 1321 appendix A.5 and FIPS 180-2's examples (appendix B).
  auto hex = [](HashKind k, const std::string& s) {
    Digest d(k);
    d.update(s.data(), s.size());
    return d.hex();
  };
  EXPECT_EQ(hex(HashKind::md5, ""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(hex(HashKind::md5, "abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(hex(HashKind::md5, "12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
            "57edf4a22be3c955ac49da2e2107b67a");
  EXPECT_EQ(hex(HashKind::sha256, "abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(HashKind::sha256, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a's fed in uneven pieces: the buffering across blocks.
  Digest md5(HashKind::md5), sha(HashKind::sha256);
  const std::string a(1000, 'a');
  for (size_t done = 0, step = 1; done < 1000000; done += step, step = step % 997 + 1) {
    const size_t n = std::min(step, 1000000 - done);
    md5.update(a.data(), n);
    sha.update(a.data(), n);
  }
  EXPECT_EQ(md5.hex(), "7707d6ae4e027c70eea2a935c2296f21");
  EXPECT_EQ(sha.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(DataArchive, ExtractsAndRefusesEscapingPaths) {
  TempDir dir;
  write_archive(dir.path() + "/a.zip", {{"top/x.txt", "x"}, {"top/sub/y.txt", "yy"}, {"other.txt", "o"}});
  const std::vector<std::string> files = extract_archive(dir.path() + "/a.zip", dir.path() + "/out", "top/");
  EXPECT_EQ(files.size(), 2u);
  EXPECT_EQ(read_text(dir.path() + "/out/sub/y.txt"), "yy");
  EXPECT_FALSE(fs::exists(dir.path() + "/out/other.txt"));
  write_archive(dir.path() + "/evil.tar", {{"../escaped.txt", "x"}});
  EXPECT_HAS(error_of([&] { extract_archive(dir.path() + "/evil.tar", dir.path() + "/out"); }), "climbs out");
  EXPECT_FALSE(fs::exists(dir.path() + "/escaped.txt"));
  std::ofstream(dir.path() + "/junk.tar.gz") << "not an archive";
  EXPECT_HAS(error_of([&] { extract_archive(dir.path() + "/junk.tar.gz", dir.path() + "/out"); }), "junk.tar.gz");
}

TEST(DataDownload, Cifar10MnistAndWikiTextFromALocalServer) {
  TempDir www, data;
  write_cifar_archive(www.path() + "/cifar-10-binary.tar.gz");
  for (const char* name : {"train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"})
    write_idx(www.path() + "/" + name, std::vector<uint8_t>(3 * 28 * 28, 9), {3, 28, 28});
  for (const char* name : {"train-labels-idx1-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    write_idx(www.path() + "/" + name, {1, 2, 3}, {3});
  write_archive(www.path() + "/wikitext-2-v1.zip", {{"wikitext-2/wiki.train.tokens", " = A = \n the cat sat \n"},
                                                    {"wikitext-2/wiki.valid.tokens", " the cat \n"},
                                                    {"wikitext-2/wiki.test.tokens", " sat \n"}});
  LocalServer server(www.path());
  std::vector<std::string> lines;
  DownloadOptions o;
  o.log = [&](const std::string& l) { lines.push_back(l); };
  uint64_t last_done = 0, last_total = 0;
  o.progress = [&](const std::string&, uint64_t done, uint64_t total) { last_done = done, last_total = total; };

  const std::string cifar_root = data.path() + "/cifar10";
  EXPECT_TRUE(download_dataset(served("cifar10", server, www.path()), cifar_root, o));
  EXPECT_EQ(last_done, fs::file_size(www.path() + "/cifar-10-binary.tar.gz"));
  EXPECT_EQ(last_total, last_done);
  auto train = cifar10(cifar_root, true), test = cifar10(cifar_root, false);
  EXPECT_EQ(train->size(), 10);
  EXPECT_EQ(test->size(), 2);
  Generator g(0);
  EXPECT_EQ(test->get(1, g).label, 1);  // labels 0..9 cycle through the batches: the test batch holds 0, 1
  EXPECT_FALSE(fs::exists(cifar_root + "/cifar-10-binary.tar.gz.part"));
  // Present: nothing is fetched again.
  const std::string before = server.requests();
  EXPECT_FALSE(download_dataset(served("cifar10", server, www.path()), cifar_root, o));
  EXPECT_EQ(server.requests(), before);

  const std::string mnist_root = data.path() + "/mnist";
  EXPECT_TRUE(download_dataset(served("mnist", server, www.path()), mnist_root, o));
  EXPECT_EQ(mnist(mnist_root, true)->size(), 3);
  const std::string wt_root = data.path() + "/wikitext-2";
  EXPECT_TRUE(download_dataset(served("wikitext2", server, www.path()), wt_root, o));
  TextCorpus c = load_text_corpus(wt_root, TextLevel::word);
  EXPECT_EQ(c.valid.numel(), 3);  // "the cat <eos>"
  ASSERT_FALSE(lines.empty());
  EXPECT_HAS(lines.back(), "unpacked 3 files");
}

TEST(DataDownload, ResumesAfterACutConnection) {
  TempDir www, data;
  write_cifar_archive(www.path() + "/cifar-10-binary.tar.gz");
  const uint64_t size = fs::file_size(www.path() + "/cifar-10-binary.tar.gz");
  LocalServer server(www.path(), {"cifar-10-binary.tar.gz"});
  DatasetSource s = served("cifar10", server, www.path());
  DownloadOptions once;
  once.retries = 0;
  const std::string root = data.path() + "/cifar10";
  const std::string e = error_of([&] { download_dataset(s, root, once); });
  EXPECT_HAS(e, server.url() + "/cifar-10-binary.tar.gz");
  EXPECT_HAS(e, "run again to resume");
  const std::string part = root + "/cifar-10-binary.tar.gz.part";
  ASSERT_TRUE(fs::exists(part));
  const uint64_t half = fs::file_size(part);
  EXPECT_EQ(half, size / 2);
  // The next run asks for the rest only.
  EXPECT_TRUE(download_dataset(s, root, once));
  EXPECT_HAS(server.requests(), "/cifar-10-binary.tar.gz bytes=" + std::to_string(half) + "-");
  EXPECT_EQ(cifar10(root, false)->size(), 2);
  EXPECT_FALSE(fs::exists(part));

  // With retries (the default), one call resumes by itself.
  TempDir www2, data2;
  write_cifar_archive(www2.path() + "/cifar-10-binary.tar.gz");
  LocalServer server2(www2.path(), {"cifar-10-binary.tar.gz"});
  EXPECT_TRUE(download_dataset(served("cifar10", server2, www2.path()), data2.path()));
  EXPECT_HAS(server2.requests(), "bytes=");
  EXPECT_EQ(cifar10(data2.path(), true)->size(), 10);
}

TEST(DataDownload, StartsOverWhereTheServerIgnoresRange) {
  TempDir www, data;
  write_cifar_archive(www.path() + "/cifar-10-binary.tar.gz");
  LocalServer server(www.path(), {}, {"--no-range"});
  std::ofstream(data.path() + "/cifar-10-binary.tar.gz.part") << "stale bytes";
  EXPECT_TRUE(download_dataset(served("cifar10", server, www.path()), data.path(), {}));
  EXPECT_HAS(server.requests(), "/cifar-10-binary.tar.gz bytes=11-");
  EXPECT_EQ(cifar10(data.path(), false)->size(), 2);
}

TEST(DataDownload, BadChecksumDeletesTheFile) {
  TempDir www, data;
  write_cifar_archive(www.path() + "/cifar-10-binary.tar.gz");
  LocalServer server(www.path());
  DatasetSource s = served("cifar10", server, www.path());
  s.files[0].checksum = std::string(32, '0');
  const std::string e = error_of([&] { download_dataset(s, data.path(), {}); });
  EXPECT_HAS(e, "checksum mismatch: md5 " + md5_of(www.path() + "/cifar-10-binary.tar.gz"));
  EXPECT_HAS(e, "expected " + std::string(32, '0'));
  EXPECT_HAS(e, "deleted");
  EXPECT_FALSE(fs::exists(data.path() + "/cifar-10-binary.tar.gz"));
  EXPECT_FALSE(fs::exists(data.path() + "/cifar-10-binary.tar.gz.part"));

  // The built-in registry's published checksum is what a mirror's file is checked against: a
  // generated file under the real name is refused.
  write_idx(www.path() + "/train-images-idx3-ubyte.gz", std::vector<uint8_t>(28 * 28, 1), {1, 28, 28});
  DownloadOptions o;
  o.mirror = server.url();
  const std::string e2 = error_of([&] { download_dataset(dataset_source("fashion_mnist"), data.path(), o); });
  EXPECT_HAS(e2, "expected 8d4fb7e6c68d591d4c3dfef9ec88bf0d (the published one)");
  EXPECT_HAS(e2, server.url() + "/train-images-idx3-ubyte.gz");
  // A damaged file already in the folder is deleted and fetched again.
  const std::string root = data.path() + "/again";
  fs::create_directories(root);
  std::ofstream(root + "/cifar-10-binary.tar.gz") << "damaged";
  std::vector<std::string> lines;
  o = {};
  o.log = [&](const std::string& l) { lines.push_back(l); };
  EXPECT_TRUE(download_dataset(served("cifar10", server, www.path()), root, o));
  ASSERT_FALSE(lines.empty());
  EXPECT_HAS(lines.front(), "deleted it, downloading it again");
}

TEST(DataDownload, MissingFile404AndNoNetworkSayWhereToPutIt) {
  TempDir www, data;
  LocalServer server(www.path());
  DatasetSource s = dataset_source("cifar10");
  s.files[0].urls = {server.url() + "/cifar-10-binary.tar.gz"};
  const std::string e = error_of([&] { download_dataset(s, data.path(), {}); });
  EXPECT_HAS(e, server.url() + "/cifar-10-binary.tar.gz: HTTP 404");
  EXPECT_HAS(e, "put it in " + data.path());
  EXPECT_HAS(e, "c32a1d4ab5d03f1284b67883e8d87530");  // the checksum a file fetched by hand must have
  EXPECT_HAS(e, "data_batch_1.bin .. data_batch_5.bin and test_batch.bin");  // the loader's message
  EXPECT_FALSE(fs::exists(data.path() + "/cifar-10-binary.tar.gz.part"));

  // No network: each location tried is named with why it failed.
  s.files[0].urls = {testing::unreachable_url() + "/a.tar.gz", testing::unreachable_url() + "/b.tar.gz"};
  const std::string e2 = error_of([&] { download_dataset(s, data.path(), {}); });
  EXPECT_HAS(e2, testing::unreachable_url() + "/a.tar.gz: ");
  EXPECT_HAS(e2, testing::unreachable_url() + "/b.tar.gz: ");
  EXPECT_HAS(e2, "Without a network, fetch cifar-10-binary.tar.gz by hand");

  // An archive put there by hand is checked and unpacked without the network.
  write_cifar_archive(data.path() + "/cifar-10-binary.tar.gz");
  s.files[0].checksum = md5_of(data.path() + "/cifar-10-binary.tar.gz");
  EXPECT_TRUE(download_dataset(s, data.path(), {}));
  EXPECT_EQ(cifar10(data.path(), false)->size(), 2);
  EXPECT_HAS(error_of([] { dataset_source("imagenet"); }), "octet data prepare imagenet");
}

// RLIMIT_FSIZE makes writes past `bytes` fail (EFBIG, with SIGXFSZ ignored) as a full disk would.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit l = old_;
    l.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &l);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  sighandler_t old_handler_;
};

TEST(DataDownload, AFullDiskKeepsNothingHalfWritten) {
  TempDir www, data;
  write_cifar_archive(www.path() + "/cifar-10-binary.tar.gz");
  LocalServer server(www.path());
  DatasetSource s = served("cifar10", server, www.path());
  {
    FileSizeLimit limit(4096);
    const std::string e = error_of([&] { download_dataset(s, data.path(), {}); });
    EXPECT_HAS(e, "nothing is kept");
  }
  for (const auto& entry : fs::directory_iterator(data.path()))
    EXPECT_EQ(entry.path().filename(), ".download.lock") << "a half-written file was left";
  // Unpacking: the archive fits, the 6000-byte batch files do not; no batch file is left half-written.
  fs::copy_file(www.path() + "/cifar-10-binary.tar.gz", data.path() + "/cifar-10-binary.tar.gz");
  {
    FileSizeLimit limit(4096);
    EXPECT_HAS(error_of([&] { download_dataset(s, data.path(), {}); }), "failed");
  }
  for (const auto& entry : fs::recursive_directory_iterator(data.path()))
    if (entry.is_regular_file() && entry.path().filename() != ".download.lock") {
      EXPECT_EQ(entry.path().filename(), "cifar-10-binary.tar.gz") << entry.path();
    }
  EXPECT_TRUE(download_dataset(s, data.path(), {}));
}

}  // namespace
}  // namespace octet
