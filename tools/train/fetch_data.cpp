#include "tools/train/fetch_data.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "tools/train/progress.h"

namespace octet::train {

bool fetch_dataset(const DatasetSource& s, const std::string& root, const std::string& mirror) {
  DownloadOptions o;
  o.mirror = mirror;
  std::unique_ptr<ProgressBar> bar;
  std::string bar_file, finished;  // the file the bar shows; the one whose bar was completed
  o.progress = [&](const std::string& file, uint64_t done, uint64_t total) {
    if (total == 0 || file == finished) return;  // libcurl reports the end more than once
    const auto kib = [](uint64_t bytes) { return static_cast<int64_t>(bytes / 1024); };
    if (!bar || bar_file != file) {
      bar = std::make_unique<ProgressBar>(file + " KiB", kib(total), true, 1.0, "KiB");
      bar_file = file;
    }
    const std::string mib =
        fmt::format("{:.1f}/{:.1f} MiB", static_cast<double>(done) / (1 << 20), static_cast<double>(total) / (1 << 20));
    if (done < total) return bar->update(kib(done), mib);
    bar->finish(mib);
    bar.reset();
    finished = file;
  };
  o.log = [&](const std::string& line) {
    if (bar) bar->end_line();
    bar.reset();
    finished.clear();
    spdlog::info("{}", line);
  };
  if (!dataset_present(s, root)) spdlog::info("data: fetching {} into {}", s.name, root);
  // Ctrl-C (or SIGTERM) while downloading ends the process at once, the part file kept to resume
  // from: `octet train`'s handler would only ask the training loop, not yet running, to stop.
  struct DefaultSignals {
    void (*int_)(int) = std::signal(SIGINT, SIG_DFL);
    void (*term_)(int) = std::signal(SIGTERM, SIG_DFL);
    ~DefaultSignals() {
      std::signal(SIGINT, int_);
      std::signal(SIGTERM, term_);
    }
  } signals;
  try {
    return download_dataset(s, root, o);
  } catch (...) {
    if (bar) bar->end_line();  // the error on a line of its own
    throw;
  }
}

namespace {

// The download (`octet data get NAME`) of data.dataset `dataset` read from `root`, if there is one: a
// text corpus is WikiText by its folder's name.
const DatasetSource* source_of(const std::string& dataset, const std::string& root) {
  if (dataset == "text" || dataset == "text_chars") {
    const std::string folder = std::filesystem::path(root).lexically_normal().filename().string();
    return folder == "wikitext-2" || folder == "wikitext-103" ? &dataset_source(folder) : nullptr;
  }
  for (const DatasetSource& s : dataset_sources())
    if (s.name == dataset) return &s;
  return nullptr;
}

// Data that is not in its folder but can be downloaded: an error that says how, before the loader
// would name the first missing file.
void check_present(const std::string& dataset, const std::string& root) {
  const DatasetSource* s = source_of(dataset, root);
  if (s == nullptr || dataset_present(*s, root)) return;
  std::string wanted;
  for (std::string p : s->present) {
    if (const size_t bar = p.find('|'); bar != std::string::npos) p.replace(bar, 1, " or ");
    wanted += (wanted.empty() ? "" : ", ") + p;
  }
  OCTET_FAIL("data: ", dataset, " is not in ", root, " (it needs ", wanted, "); fetch it with `octet data get ",
             s->name, " --root ", root,
             "`, or add data.download=true to download it before the run, or set data.root "
             "to the folder that holds it");
}

}  // namespace

std::string download_for_recipe(const Recipe& r, const std::string& dataset, const std::string& root,
                                bool root_is_default) {
  if (!r.boolean("data.download")) {
    check_present(dataset, root);
    return root;
  }
  if (dataset == "toy_grammar") return root;
  OCTET_CHECK(dataset != "image_folder",
              "recipe data.download: true, but ImageNet (data.dataset image_folder) "
              "cannot be downloaded (its licence asks each user to sign up at image-net.org); sort its validation "
              "images with `octet data prepare imagenet --val-tar F --devkit F` and set data.download: false");
  std::string name = dataset;
  if (dataset == "text" || dataset == "text_chars") {
    const std::string folder = std::filesystem::path(root).lexically_normal().filename().string();
    OCTET_CHECK(folder == "wikitext-2" || folder == "wikitext-103", "recipe data.download: true with data.dataset ",
                dataset,
                " fetches WikiText-2 or WikiText-103 by data.root's folder name (.../wikitext-2 or "
                ".../wikitext-103), got data.root ",
                root);
    name = folder == "wikitext-2" ? "wikitext2" : "wikitext103";
  }
  const DatasetSource& s = dataset_source(name);
  // The default Fashion-MNIST folder belongs to a Debian package (not writable): download beside the run.
  const std::string dir = root_is_default && !dataset_present(s, root) ? s.root : root;
  fetch_dataset(s, dir);
  return dir;
}

}  // namespace octet::train
