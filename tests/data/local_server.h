// Test helpers for the dataset downloader: a local HTTP server (tests/data/http_server.py, Python 3's
// http.server with Range support) on 127.0.0.1 at a free port, and archives written with libarchive
// in the layouts the real datasets use.
//   LocalServer server(dir.path(), {"cifar-10-binary.tar.gz"});   // that file is cut once
//   write_archive(dir.path() + "/x.tar.gz", {{"cifar-10-batches-bin/test_batch.bin", bytes}});
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace octet::testing {

class LocalServer {
 public:
  // Serves the files of `dir`; each of `cut` is cut mid-body on its first request; `extra`: more of
  // http_server.py's options (--no-range).
  explicit LocalServer(const std::string& dir, const std::vector<std::string>& cut = {},
                       const std::vector<std::string>& extra = {})
      : log_(dir + "/.requests") {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      std::vector<std::string> args = {
          "python3", std::string(OCTET_TESTS_DIR) + "/data/http_server.py", "--dir", dir, "--log", log_};
      for (const std::string& c : cut) args.insert(args.end(), {"--cut", c});
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp("python3", argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    std::string line;
    char c;
    while (::read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(fds[0]);
    if (line.empty()) throw std::runtime_error("tests/data/http_server.py did not start (is python3 installed?)");
    url_ = "http://127.0.0.1:" + line;
  }
  ~LocalServer() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;
  const std::string& url() const { return url_; }
  // The requests so far, one "PATH RANGE" line each.
  std::string requests() const {
    std::ifstream f(log_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

 private:
  pid_t pid_ = -1;
  std::string log_, url_;
};

// A URL on 127.0.0.1 where nothing listens (as without a network: the connection is refused).
inline std::string unreachable_url() { return "http://127.0.0.1:9"; }

// Writes an archive of `files` (path in the archive, content): .tar.gz, .tar or .zip by the name.
inline void write_archive(const std::string& path, const std::vector<std::pair<std::string, std::string>>& files) {
  struct archive* a = archive_write_new();
  const bool zip = path.ends_with(".zip"), gz = path.ends_with(".gz");
  if (zip)
    archive_write_set_format_zip(a);
  else
    archive_write_set_format_pax_restricted(a);
  if (gz) archive_write_add_filter_gzip(a);
  if (archive_write_open_filename(a, path.c_str()) != ARCHIVE_OK) throw std::runtime_error("cannot write " + path);
  for (const auto& [name, content] : files) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_write_header(a, e);
    archive_write_data(a, content.data(), content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace octet::testing
