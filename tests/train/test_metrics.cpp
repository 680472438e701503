// Metrics: JSONL records (counts as integers) survive a resume (also a killed run's partial last
// line and lines a person broke), and the curves page draws what was recorded.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tests/data/temp_dir.h"
#include "tests/train/run_util.h"
#include "tools/train/metrics.h"

namespace octet::train {
namespace {

// Chart axes (issue 25 item 14): round ticks 1, 2 or 5 x 10^n apart that cover the data, labels
// without float noise, a range around a single value, and a log axis for values spanning decades.
TEST(Metrics, ChartAxesHaveRoundTicks) {
  auto round_step = [](double step) {
    const double m = step / std::pow(10.0, std::floor(std::log10(step) + 1e-12));
    return std::abs(m - 1) < 1e-9 || std::abs(m - 2) < 1e-9 || std::abs(m - 5) < 1e-9 || std::abs(m - 10) < 1e-9;
  };
  const std::vector<std::pair<double, double>> ranges = {{0.0123, 0.107},      {0, 100},      {1, 12},     {-3.7, 2.2},
                                                         {7.185e-08, 9.9e-08}, {1500, 37000}, {2.30, 2.31}};
  for (auto [lo, hi] : ranges) {
    const ChartAxis a = chart_axis(lo, hi, false);
    ASSERT_GE(a.ticks.size(), 3u) << lo << " " << hi;
    EXPECT_LE(a.ticks.size(), 11u) << lo << " " << hi;
    const double step = a.ticks[1] - a.ticks[0];
    EXPECT_TRUE(round_step(step)) << step;
    for (size_t i = 1; i < a.ticks.size(); ++i) {
      EXPECT_NEAR(a.ticks[i] - a.ticks[i - 1], step, 1e-9 * step);
      EXPECT_NE(a.names[i], a.names[i - 1]) << a.names[i];  // distinct labels
    }
    EXPECT_LE(a.ticks.front(), lo + 1e-9 * step);  // k * step may round a hair above lo
    EXPECT_GE(a.ticks.back(), hi - 1e-9 * step);
    EXPECT_LE(a.lo, lo);  // the axis holds the data
    EXPECT_GE(a.hi, hi);
    for (const std::string& n : a.names) EXPECT_LE(n.size(), 9u) << n;  // no 7.185e-08 style noise
  }
  EXPECT_EQ(chart_axis(0.0123, 0.107, false).names[1], "0.05");
  EXPECT_EQ(chart_axis(1500, 37000, false).names.back(), "40k");
  // A single value: distinct ticks around it.
  const ChartAxis one = chart_axis(5, 5, false);
  EXPECT_LT(one.ticks.front(), 5);
  EXPECT_GT(one.ticks.back(), 5);
  EXPECT_NE(one.names.front(), one.names.back());
  // A learning rate decayed from 0.05 to 1e-5: log ticks at powers of ten.
  const ChartAxis lr = chart_axis(1e-5, 0.05, true);
  EXPECT_TRUE(lr.log);
  EXPECT_EQ(lr.names.front(), "1e-05");
  EXPECT_EQ(lr.names.back(), "0.1");
  EXPECT_NEAR(lr.pos(1e-3), 0.5, 1e-12);
  EXPECT_FALSE(chart_axis(10, 900, false).log);
  EXPECT_FALSE(chart_axis(20, 90, true).log);  // less than two decades: linear
}

TEST(Metrics, RecordsResumeAndCurves) {
  octet::testing::TempDir dir;
  {
    MetricsLog log(dir.path(), false);
    log.record({"train", {{"step", 1}, {"epoch", 0.5}, {"loss", 2.0}, {"top1", 10}, {"lr", 0.1}}});
    log.record({"test", {{"step", 2}, {"epoch", 1}, {"loss", 1.5}, {"top1", 40}}});
  }
  {
    std::ofstream(dir.path() + "/metrics.jsonl", std::ios::app) << "{\"split\":\"tra";  // a line cut by a crash
  }
  MetricsLog resumed(dir.path(), true);
  ASSERT_EQ(resumed.records().size(), 2u);
  EXPECT_EQ(resumed.records()[1].split, "test");
  EXPECT_EQ(resumed.records()[1].values.at("top1"), 40);
  resumed.record({"train", {{"step", 3}, {"epoch", 1.5}, {"loss", 1.0}, {"top1", 60}, {"lr", 0.05}}});
  resumed.write_curves();
  const std::string html = file_text(dir.path() + "/curves.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  size_t lines = 0;
  for (size_t at = html.find("<polyline"); at != std::string::npos; at = html.find("<polyline", at + 1)) ++lines;
  EXPECT_EQ(lines, 5u);  // loss train/test, top-1 train/test, lr; samples/s was never recorded
  EXPECT_NE(html.find("learning rate"), std::string::npos);
}

// Counts are integers ("step":30, not 30.0); other numbers stay numbers, non-finite ones null.
TEST(Metrics, CountsAreWrittenAsIntegers) {
  octet::testing::TempDir dir;
  {
    MetricsLog log(dir.path(), false);
    log.record({"train",
                {{"step", 30},
                 {"skipped_steps", 2},
                 {"epoch", 1.0},
                 {"loss", std::numeric_limits<double>::quiet_NaN()},
                 {"lr", 0.05},
                 {"top1", 100}}});
  }
  EXPECT_EQ(file_text(dir.path() + "/metrics.jsonl"),
            "{\"epoch\":1.0,\"loss\":null,\"lr\":0.05,\"skipped_steps\":2,\"split\":\"train\",\"step\":30,"
            "\"top1\":100.0}\n");
  const std::vector<MetricRecord> back = read_metrics(dir.path() + "/metrics.jsonl");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].values.at("step"), 30.0);
  EXPECT_EQ(back[0].values.count("loss"), 0u);
}

// A killed run leaves a partial last line: the resume keeps the whole records, cuts the partial
// line from the file (with a warning) and appends on a line of its own, so the record written
// after the resume is not glued to the fragment and lost at the next resume.
TEST(Metrics, ResumeAfterKillDropsPartialLineAndAppendsCleanly) {
  octet::testing::TempDir dir;
  const std::string path = dir.path() + "/metrics.jsonl";
  {
    MetricsLog log(dir.path(), false);
    log.record({"train", {{"step", 1}, {"loss", 2.0}}});
    log.record({"test", {{"step", 2}, {"top1", 40}}});
  }
  const std::string whole = file_text(path);
  std::ofstream(path, std::ios::app) << "{\"loss\":1.2,\"spl";  // killed mid-write
  {
    MetricsLog resumed(dir.path(), true);
    ASSERT_EQ(resumed.records().size(), 2u);
    EXPECT_EQ(file_text(path), whole);  // the fragment is gone from the file too
    resumed.record({"train", {{"step", 3}, {"loss", 1.0}}});
  }
  MetricsLog again(dir.path(), true);
  ASSERT_EQ(again.records().size(), 3u);
  EXPECT_EQ(again.records()[2].split, "train");
  EXPECT_EQ(again.records()[2].values.at("step"), 3);
}

// A whole record missing only its newline (an editor's save) is kept, and the next record goes on
// the next line.
TEST(Metrics, ResumeKeepsWholeLastRecordWithoutNewline) {
  octet::testing::TempDir dir;
  const std::string path = dir.path() + "/metrics.jsonl";
  std::ofstream(path) << "{\"split\":\"train\",\"step\":1}";
  {
    MetricsLog resumed(dir.path(), true);
    ASSERT_EQ(resumed.records().size(), 1u);
    resumed.record({"test", {{"step", 2}}});
  }
  std::vector<MetricRecord> r = read_metrics(path);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].values.at("step"), 1);
  EXPECT_EQ(r[1].split, "test");
}

// Lines a person broke or added in the middle are skipped (with a warning) and left in the file;
// values that are not numbers (null is what a NaN was written as) are left out of their record.
TEST(Metrics, ReadSkipsLinesThatAreNotRecords) {
  octet::testing::TempDir dir;
  const std::string path = dir.path() + "/metrics.jsonl";
  const std::string text =
      "{\"split\":\"train\",\"loss\":null,\"step\":1}\n\n# note\n[1,2]\n{\"split\":3,\"x\":\"y\",\"top1\":1e308}\r\n"
      "{\"split\":\"test\",\"top1\":5}\n";
  std::ofstream(path, std::ios::binary) << text;
  std::vector<MetricRecord> r = read_metrics(path);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].values.count("loss"), 0u);
  EXPECT_EQ(r[1].split, "");  // a split that is not a string is no split, and not a value either
  EXPECT_EQ(r[1].values.size(), 1u);
  EXPECT_EQ(r[2].values.at("top1"), 5);
  MetricsLog resumed(dir.path(), true);
  EXPECT_EQ(resumed.records().size(), 3u);
  EXPECT_EQ(file_text(path), text);  // a resume repairs only the last line
  EXPECT_NE(curves_html(resumed.records(), "x").find("<figure"), std::string::npos);
}

// The summary at the top of curves.html: the run's facts (run.json), its best evaluation and when,
// its progress and wall time; after a resume the best is over every record, the wall time the
// latest, and the recipe the one the run started from.
TEST(Metrics, SummaryShowsTheBestEvaluationAndSurvivesResume) {
  octet::testing::TempDir dir;
  auto row = [](const std::string& html, const std::string& key) {
    const size_t at = html.find("<th>" + key + "</th><td>");
    if (at == std::string::npos) return std::string("none");
    const size_t from = at + key.size() + 13;
    return html.substr(from, html.find("</td>", from) - from);
  };
  {
    MetricsLog log(dir.path(), false);
    log.set_facts({"recipes/fashion_mnist.yaml", "resnet20", 272474, "cpu (2 threads)", 10, {}});
    log.record({"train", {{"step", 10}, {"epoch", 0.5}, {"loss", 2.0}, {"top1", 30}, {"wall_s", 5}}});
    log.record({"test", {{"step", 20}, {"epoch", 1}, {"loss", 1.5}, {"top1", 62.5}, {"wall_s", 11}}});
    log.record({"test", {{"step", 40}, {"epoch", 2}, {"loss", 1.2}, {"top1", 71.25}, {"wall_s", 24}}});
    log.record({"test", {{"step", 60}, {"epoch", 3}, {"loss", 1.3}, {"top1", 70}, {"wall_s", 38}}});
    log.write_curves();
    const std::string html = file_text(dir.path() + "/curves.html");
    EXPECT_EQ(row(html, "recipe"), "recipes/fashion_mnist.yaml");
    EXPECT_EQ(row(html, "model"), "resnet20, 272,474 parameters (0.272 M)");
    EXPECT_EQ(row(html, "device"), "cpu (2 threads)");
    EXPECT_EQ(row(html, "best"), "test top-1 71.25% at epoch 2 (step 40)");
    EXPECT_EQ(row(html, "progress"), "step 60, epoch 3 of 10");
    EXPECT_EQ(row(html, "wall time"), "38 s");
    EXPECT_LT(html.find("<table class='summary'>"), html.find("<svg"));  // at the top
  }
  {
    MetricsLog resumed(dir.path(), true);
    EXPECT_EQ(resumed.facts().model, "resnet20");  // read back from run.json
    // A resume's recipe is the checkpoint's: the page keeps the run's own.
    resumed.set_facts({"runs/x/last.safetensors (recipe)", "resnet20", 272474, "cuda:0", 10, {}});
    resumed.record({"test", {{"step", 80}, {"epoch", 4}, {"loss", 1.1}, {"top1", 70.5}, {"wall_s", 3725}}});
    resumed.write_curves();
    const std::string html = file_text(dir.path() + "/curves.html");
    EXPECT_EQ(row(html, "recipe"), "recipes/fashion_mnist.yaml");
    EXPECT_EQ(row(html, "device"), "cuda:0");
    EXPECT_EQ(row(html, "best"), "test top-1 71.25% at epoch 2 (step 40)");  // over every record
    EXPECT_EQ(row(html, "wall time"), "1 h 02 min");
    resumed.record({"test", {{"step", 100}, {"epoch", 5}, {"top1", 80}, {"wall_s", 3790}}});
    EXPECT_EQ(row(curves_html(resumed.records(), "x", resumed.facts()), "best"),
              "test top-1 80.00% at epoch 5 (step 100)");
  }
  // A language model: the lowest validation perplexity, and the test perplexity of the run's end.
  const std::vector<MetricRecord> lm = {{"valid", {{"step", 100}, {"epoch", 1}, {"ppl", 180.5}, {"wall_s", 65}}},
                                        {"valid", {{"step", 200}, {"epoch", 2}, {"ppl", 141.25}}},
                                        {"valid", {{"step", 300}, {"epoch", 3}, {"ppl", 150}}},
                                        {"test", {{"step", 300}, {"epoch", 3}, {"ppl", 138.125}}}};
  const std::string html = curves_html(lm, "lm");
  EXPECT_EQ(row(html, "best"), "valid perplexity 141.25 at epoch 2 (step 200)");
  EXPECT_EQ(row(html, "test"), "perplexity 138.12");
  EXPECT_EQ(row(html, "wall time"), "1 min 05 s");
  EXPECT_EQ(row(html, "recipe"), "none");  // no facts: no row for them
  // A run.json that is not an object: the facts start afresh, the resume goes on.
  std::ofstream(dir.path() + "/run.json") << "[1, 2";
  MetricsLog again(dir.path(), true);
  EXPECT_EQ(again.facts().recipe, "");
  EXPECT_EQ(again.records().size(), 6u);
}

// The INT8 layers' d_c heat map has a row for every INT8 layer, in the run's (model) order, or
// without it in natural order (layer10 after layer9); a layer's NaN (no backward pass yet) is blank.
TEST(Metrics, Int8HeatMapRowsInModelOrder) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<MetricRecord> records = {{"train", {{"step", 2}, {"epoch", 0.1}, {"loss", 2.0}}}};
  for (int step : {2, 4, 6}) {
    MetricRecord r{"int8", {{"step", step}, {"epoch", 0.1 * step}}};
    for (const char* l : {"conv1", "layer1.0.conv1", "layer10.0.conv1", "layer9.0.conv1", "fc"})
      r.values[std::string(l) + ".cos_distance"] = std::string(l) == "fc" && step == 2 ? nan : 0.01 * step;
    records.push_back(r);
  }
  RunFacts facts;
  facts.int8_layers = {"conv1", "layer1.0.conv1", "layer9.0.conv1", "layer10.0.conv1", "fc"};
  auto rows_of = [](const std::string& html) {
    std::vector<std::string> rows;
    for (size_t at = html.find("<g><title>"); at != std::string::npos; at = html.find("<g><title>", at + 1))
      rows.push_back(html.substr(at + 10, html.find("</title>", at) - at - 10));
    return rows;
  };
  const std::string html = curves_html(records, "run", facts);
  EXPECT_EQ(rows_of(html), facts.int8_layers);
  size_t cells = 0;
  for (size_t at = html.find("<rect class='c'"); at != std::string::npos; at = html.find("<rect class='c'", at + 1))
    ++cells;
  EXPECT_EQ(cells, 14u);  // 5 layers x 3 steps, fc's first blank
  EXPECT_EQ(rows_of(curves_html(records, "run")),
            (std::vector<std::string>{"conv1", "fc", "layer1.0.conv1", "layer9.0.conv1", "layer10.0.conv1"}));
}

}  // namespace
}  // namespace octet::train
