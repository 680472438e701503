#include "data/fetch/download.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "data/fetch/archive.h"
#include "data/file_io.h"

namespace octet {
namespace {

namespace fs = std::filesystem;

RemoteFile gz_file(const std::string& base, const std::string& name, const std::string& md5) {
  return RemoteFile{name, {base + name}, HashKind::md5, md5, false, ""};
}

// The MNIST-layout datasets: four gzipped IDX files, read as they are (data/mnist.h takes .gz).
std::vector<std::string> idx_present() {
  std::vector<std::string> p;
  for (const char* f :
       {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    p.push_back(std::string(f) + ".gz|" + f);
  return p;
}

std::vector<DatasetSource> make_sources() {
  std::vector<DatasetSource> s;
  // CIFAR-10 binary version: URL and md5sum from the table on https://www.cs.toronto.edu/~kriz/cifar.html
  // ("CIFAR-10 binary version (suitable for C programs)"); only an MD5 is published.
  s.push_back(
      {"cifar10",
       "data/cifar10",
       {{"cifar-10-binary.tar.gz",
         {"https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"},
         HashKind::md5,
         "c32a1d4ab5d03f1284b67883e8d87530",
         true,
         ""}},
       {"cifar-10-batches-bin/data_batch_1.bin|data_batch_1.bin",
        "cifar-10-batches-bin/data_batch_2.bin|data_batch_2.bin",
        "cifar-10-batches-bin/data_batch_3.bin|data_batch_3.bin",
        "cifar-10-batches-bin/data_batch_4.bin|data_batch_4.bin",
        "cifar-10-batches-bin/data_batch_5.bin|data_batch_5.bin", "cifar-10-batches-bin/test_batch.bin|test_batch.bin"},
       "extract its cifar-10-batches-bin (https://www.cs.toronto.edu/~kriz/cifar.html) into ROOT so that ROOT "
       "(or its cifar-10-batches-bin folder) holds data_batch_1.bin .. data_batch_5.bin and test_batch.bin"});
  // MNIST: torchvision's mirror (datasets/mnist.py, MNIST.mirrors and MNIST.resources, with these
  // MD5s), then the original site, http://yann.lecun.com/exdb/mnist/.
  DatasetSource mnist{"mnist",
                      "data/mnist",
                      {},
                      idx_present(),
                      "put the four IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in ROOT"};
  for (const auto& [name, md5] : {std::pair{"train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"},
                                  std::pair{"train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"},
                                  std::pair{"t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"},
                                  std::pair{"t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"}}) {
    RemoteFile f = gz_file("https://ossci-datasets.s3.amazonaws.com/mnist/", name, md5);
    f.urls.push_back(std::string("http://yann.lecun.com/exdb/mnist/") + name);
    mnist.files.push_back(f);
  }
  s.push_back(mnist);
  // Fashion-MNIST: URLs and MD5s from the table in github.com/zalandoresearch/fashion-mnist's README
  // (torchvision's FashionMNIST.resources lists the same).
  const std::string fm = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/";
  s.push_back({"fashion_mnist",
               "data/fashion-mnist",
               {gz_file(fm, "train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
                gz_file(fm, "train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
                gz_file(fm, "t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
                gz_file(fm, "t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310")},
               idx_present(),
               "put the four IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in ROOT (Debian: apt "
               "install dataset-fashion-mnist, which fills /usr/share/datasets/fashion-mnist)"});
  // WikiText (Merity et al. 2016): the MD5s as torchtext lists them (torchtext/datasets/wikitext2.py
  // and wikitext103.py); the zips hold wikitext-2/wiki.*.tokens. torchtext's location, the authors'
  // S3 bucket research.metamind.io, answers 403 since 2024 (pytorch/text#2247, #2255); the first
  // author's own host serves the same zips, so it comes first and the bucket stays as the fallback.
  const std::vector<std::string> wt = {"https://wikitext.smerity.com/",
                                       "https://s3.amazonaws.com/research.metamind.io/wikitext/"};
  for (const auto& [name, md5] : {std::pair{"wikitext-2", "542ccefacc6c27f945fb54453812b3cd"},
                                  std::pair{"wikitext-103", "9ddaacaf6af0710eda8c456decff7832"}}) {
    const std::string zip = std::string(name) + "-v1.zip";
    s.push_back({std::string(name) == "wikitext-2" ? "wikitext2" : "wikitext103",
                 std::string("data/") + name,
                 {{zip, {wt[0] + zip, wt[1] + zip}, HashKind::md5, md5, true, std::string(name) + "/"}},
                 {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"},
                 "put its wiki.{train,valid,test}.tokens in ROOT"});
  }
  return s;
}

std::string with_root(std::string text, const std::string& root) {
  for (size_t at; (at = text.find("ROOT")) != std::string::npos;) text.replace(at, 4, root);
  return text;
}

std::string errno_text(int e) { return std::strerror(e); }

// libcurl's process-wide state, set up once.
void curl_init_once() {
  static const CURLcode ok = curl_global_init(CURL_GLOBAL_DEFAULT);
  OCTET_CHECK(ok == CURLE_OK, "download: libcurl failed to initialize: ", curl_easy_strerror(ok));
}

// One transfer into `part` (appended from its current size).
struct Transfer {
  int fd = -1;
  uint64_t offset = 0;  // bytes in the part file when this transfer started
  int write_errno = 0;  // a failed write (a full disk)
  bool checked_status = false;
  CURL* curl = nullptr;
  const DownloadOptions* opts = nullptr;
  const std::string* name = nullptr;
};

size_t on_data(char* data, size_t, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  if (!t->checked_status) {
    t->checked_status = true;
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    if (t->offset > 0 && code == 200) {  // the whole file again, not the rest: start over
      if (::ftruncate(t->fd, 0) != 0) {
        t->write_errno = errno;
        return 0;
      }
      t->offset = 0;
    }
  }
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(t->fd, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      t->write_errno = w < 0 ? errno : ENOSPC;
      return 0;  // libcurl stops with CURLE_WRITE_ERROR
    }
    done += static_cast<size_t>(w);
  }
  return n;
}

int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->opts->progress)
    t->opts->progress(*t->name, t->offset + static_cast<uint64_t>(now),
                      total > 0 ? t->offset + static_cast<uint64_t>(total) : 0);
  return 0;
}

uint64_t size_or_zero(const std::string& path) {
  std::error_code ec;
  const uintmax_t n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

// Fetches `url` into `part`, resuming. Returns "" on a complete transfer, else why it failed.
std::string fetch(const std::string& url, const std::string& part, const std::string& name,
                  const DownloadOptions& opts) {
  curl_init_once();
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  OCTET_CHECK(curl != nullptr, "download: libcurl failed to start a transfer");
  for (int attempt = 0;; ++attempt) {
    Transfer t;
    t.fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    OCTET_CHECK(t.fd >= 0, "download: cannot create ", part, ": ", errno_text(errno));
    t.offset = size_or_zero(part);
    t.curl = curl.get();
    t.opts = &opts;
    t.name = &name;
    char error[CURL_ERROR_SIZE] = "";
    curl_easy_reset(curl.get());
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "octet");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, opts.connect_timeout_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, opts.stall_timeout_s);
    curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(t.offset));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
    const CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    const bool closed = ::close(t.fd) == 0;
    if (t.write_errno != 0 || (rc == CURLE_OK && !closed)) {
      const int e = t.write_errno != 0 ? t.write_errno : errno;
      ::unlink(part.c_str());
      OCTET_FAIL("download: writing ", part, " failed: ", errno_text(e), "; deleted it, nothing is kept (free ",
                 "some space and run again)");
    }
    if (rc != CURLE_OK && size_or_zero(part) == 0) ::unlink(part.c_str());  // nothing to resume from
    if (rc == CURLE_OK) return "";
    // 416: the part file already holds the whole file (or more); its checksum decides.
    if (rc == CURLE_HTTP_RETURNED_ERROR && code == 416 && t.offset > 0) return "";
    if (rc == CURLE_HTTP_RETURNED_ERROR) return "HTTP " + std::to_string(code);
    if (rc == CURLE_RANGE_ERROR && t.offset > 0) {  // no byte ranges here: from the start
      if (::truncate(part.c_str(), 0) != 0) OCTET_FAIL("download: cannot truncate ", part, ": ", errno_text(errno));
      if (attempt < opts.retries) continue;
    }
    // A cut connection: try again from what arrived, while it brings bytes.
    const std::string why = error[0] ? error : curl_easy_strerror(rc);
    if (attempt < opts.retries && size_or_zero(part) > t.offset) continue;
    return why;
  }
}

bool exists_any(const std::string& root, const std::string& alternatives) {
  size_t start = 0;
  for (;;) {
    const size_t bar = alternatives.find('|', start);
    if (file_exists(root + "/" + alternatives.substr(start, bar - start))) return true;
    if (bar == std::string::npos) return false;
    start = bar + 1;
  }
}

}  // namespace

const std::vector<DatasetSource>& dataset_sources() {
  static const std::vector<DatasetSource> sources = make_sources();
  return sources;
}

const DatasetSource& dataset_source(const std::string& name) {
  // Folder names and other spellings name a dataset too: fashion-mnist, WikiText-2, wikitext_2.
  auto spelling = [](const std::string& text) {
    std::string out;
    for (char c : text)
      if (c != '-' && c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  std::string known;
  for (const DatasetSource& s : dataset_sources()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  for (const DatasetSource& s : dataset_sources())
    if (spelling(name) == spelling(s.name) || spelling(name) == spelling(fs::path(s.root).filename().string()))
      return s;
  throw UsageError(detail::str_cat("data: no download for dataset '", name, "' (known: ", known,
                                   "; ImageNet cannot be downloaded: see `octet data prepare imagenet`)"));
}

bool dataset_present(const DatasetSource& s, const std::string& root) {
  for (const std::string& p : s.present)
    if (!exists_any(root, p)) return false;
  return true;
}

void download_file(const RemoteFile& f, const std::string& path, const DownloadOptions& opts) {
  auto log = [&](const std::string& line) {
    if (opts.log) opts.log(line);
  };
  const std::string expected = std::string(hash_name(f.hash)) + " " + f.checksum;
  if (file_exists(path)) {
    const std::string got = file_digest(f.hash, path);
    if (got == f.checksum) return;
    fs::remove(path);
    log(detail::str_cat(path, ": ", hash_name(f.hash), " ", got, ", expected ", f.checksum,
                        " (damaged or a different file): deleted it, downloading it again"));
  }
  std::vector<std::string> urls = f.urls;
  if (!opts.mirror.empty()) {
    // A mirror given as a folder (no scheme) is a local copy: file:///its/absolute/path.
    const std::string base =
        opts.mirror.find("://") == std::string::npos ? "file://" + fs::absolute(opts.mirror).string() : opts.mirror;
    urls = {base + (base.ends_with("/") ? "" : "/") + f.name};
  }
  const std::string part = path + ".part";
  std::string failures;
  for (const std::string& url : urls) {
    if (file_exists(part)) log(detail::str_cat("resuming ", f.name, " at byte ", size_or_zero(part), " from ", url));
    const std::string why = fetch(url, part, f.name, opts);
    if (why.empty()) {
      const std::string got = file_digest(f.hash, part);
      if (got == f.checksum) {
        OCTET_CHECK(::rename(part.c_str(), path.c_str()) == 0, "download: renaming ", part, " to ", path,
                    " failed: ", errno_text(errno));
        log(detail::str_cat("downloaded ", path, " (", size_or_zero(path), " bytes, ", expected, " ok)"));
        return;
      }
      fs::remove(part);
      failures += detail::str_cat("\n  ", url, ": checksum mismatch: ", hash_name(f.hash), " ", got, ", expected ",
                                  f.checksum, " (the published one); the file was deleted");
      continue;
    }
    failures += "\n  " + url + ": " + why;
  }
  const std::string folder = fs::path(path).parent_path().string();
  OCTET_FAIL("download: could not fetch ", f.name, ":", failures, "\n",
             file_exists(part) ? "The part downloaded so far is kept in " + part + "; run again to resume it. " : "",
             "Without a network, fetch ", f.name, " by hand (", f.urls.empty() ? "" : f.urls.front(), ", ", expected,
             ") and put it in ", folder.empty() ? "." : folder);
}

namespace {

// An exclusive lock on a data folder's downloads, held from construction to destruction, and the
// lock file removed when it is released (on success or failure: nothing is left behind). The
// holder unlinks the file before it unlocks, so a process that waited on it finds its file gone
// (no link left) and locks a fresh one.
class DownloadLock {
 public:
  explicit DownloadLock(const std::string& path) : path_(path) {
    while (true) {
      fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      OCTET_CHECK(fd_ >= 0, "data: cannot create ", path, ": ", errno_text(errno));
      int r;
      while ((r = ::flock(fd_, LOCK_EX)) != 0 && errno == EINTR) {
      }
      if (r != 0) {
        const std::string why = errno_text(errno);
        ::close(fd_);
        OCTET_FAIL("data: cannot lock ", path, ": ", why);
      }
      struct stat st {};
      if (::fstat(fd_, &st) == 0 && st.st_nlink > 0) return;  // the current lock file, now ours
      ::close(fd_);  // its holder removed it while this process waited: lock the new one
    }
  }
  ~DownloadLock() {
    ::unlink(path_.c_str());
    ::close(fd_);  // closing releases the lock
  }
  DownloadLock(const DownloadLock&) = delete;
  DownloadLock& operator=(const DownloadLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

bool download_dataset(const DatasetSource& s, const std::string& root, DownloadOptions opts) {
  if (dataset_present(s, root)) return false;
  if (opts.mirror.empty())
    if (const char* m = std::getenv("OCTET_DATA_MIRROR")) opts.mirror = m;
  std::error_code ec;
  fs::create_directories(root, ec);
  OCTET_CHECK(!ec, "data: cannot create the data folder ", root, ": ", ec.message());
  // One process at a time per folder (the ranks of a data-parallel run open the same data): the
  // others wait, then find the dataset there.
  const DownloadLock lock(root + "/.download.lock");
  if (dataset_present(s, root)) return false;
  for (const RemoteFile& f : s.files) {
    const std::string path = root + "/" + f.name;
    // A gzipped IDX file already there unpacked (the loaders read either).
    if (!f.unpack && f.name.ends_with(".gz") && file_exists(path.substr(0, path.size() - 3))) continue;
    try {
      download_file(f, path, opts);
    } catch (const Error& e) {
      OCTET_FAIL(e.what(), " (octet checks it", f.unpack ? " and unpacks it" : "", "), or ", with_root(s.manual, root),
                 ".");
    }
    if (!f.unpack) continue;
    const std::vector<std::string> files = extract_archive(path, root, f.strip);
    if (opts.log) opts.log(detail::str_cat("unpacked ", files.size(), " files from ", path, " into ", root));
  }
  std::string wanted;
  for (const std::string& p : s.present) wanted += (wanted.empty() ? "" : ", ") + p;
  OCTET_CHECK(dataset_present(s, root), "data: ", s.name, ": after downloading, ", root, " still lacks some of ",
              wanted, " (the archive's layout changed?); ", with_root(s.manual, root));
  return true;
}

}  // namespace octet
