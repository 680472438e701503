// Fuzzes the metrics.jsonl reader a resumed run uses (tools/train/metrics.h): the input is the file a
// killed run or a person left. Resuming must keep what parses, repair the file so appends land on
// a line of their own (checked: after one more record, reading the file back gives exactly the
// log's records), and draw the curves page from whatever values were read.
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "fuzz_util.h"
#include "tools/train/metrics.h"

namespace {

bool same(const octet::train::MetricRecord& a, const octet::train::MetricRecord& b) {
  if (a.split != b.split || a.values.size() != b.values.size()) return false;
  for (auto ia = a.values.begin(), ib = b.values.begin(); ia != a.values.end(); ++ia, ++ib)
    if (ia->first != ib->first || !(ia->second == ib->second || (std::isnan(ia->second) && std::isnan(ib->second))))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (spdlog::set_level(spdlog::level::off), true);
  (void)quiet;
  const std::string dir = octet::fuzz::scratch_dir() + "/metrics";
  std::filesystem::create_directories(dir);
  octet::fuzz::write_bytes(dir + "/metrics.jsonl", data, size);
  try {
    octet::train::MetricsLog log(dir, true);
    log.record({"train", {{"step", 7}, {"epoch", 0.25}, {"loss", 1.5}}});
    (void)octet::train::curves_html(log.records(), "fuzz");
    std::vector<octet::train::MetricRecord> again = octet::train::read_metrics(dir + "/metrics.jsonl");
    if (again.size() != log.records().size()) __builtin_trap();  // the append was merged into a bad line
    for (size_t i = 0; i < again.size(); ++i)
      if (!same(again[i], log.records()[i])) __builtin_trap();
  } catch (const octet::Error&) {
  }
  return 0;
}
