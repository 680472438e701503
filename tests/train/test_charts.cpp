// Charts (tools/train/charts.h; issue 25 item 14): point labels that do not collide or leave the
// plot, and the heat map of the INT8 layers' d_c.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "tools/train/charts.h"

namespace octet::train {
namespace {

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool inside(const LabelBox& b, const LabelBox& area) {
  return b.x >= area.x && b.y >= area.y && b.x + b.w <= area.x + area.w && b.y + b.h <= area.y + area.h;
}

// A sweep's chart: a cluster of configurations at nearly the same latency and accuracy, and points
// at the plot's edges. Every label shown is inside the plot, over no other label and no point;
// a point with room around it gets its label.
TEST(Charts, PointLabelsNeitherOverlapNorLeaveThePlot) {
  const LabelBox area{64, 26, 468, 202};
  std::vector<std::pair<double, double>> points;
  std::vector<std::string> labels;
  for (int i = 0; i < 24; ++i) {  // 24 points within 30 x 20 px
    points.emplace_back(200 + (i % 6) * 5, 100 + (i / 6) * 5);
    labels.push_back("w" + std::to_string(i % 8 + 1) + "a" + std::to_string(8 << (i % 3)));
  }
  points.emplace_back(area.x + area.w - 2, area.y + 2), labels.push_back("fp32");       // top right corner
  points.emplace_back(area.x + 2, area.y + area.h - 2), labels.push_back("int8 (zp)");  // bottom left
  points.emplace_back(400, 180), labels.push_back("a lone point far from the others");  // room all round
  const std::vector<PlacedLabel> placed = place_labels(points, labels, points, area);
  ASSERT_EQ(placed.size(), points.size());
  size_t shown = 0;
  for (size_t i = 0; i < placed.size(); ++i) {
    if (!placed[i].shown) continue;
    ++shown;
    const LabelBox& b = placed[i].box;
    EXPECT_TRUE(inside(b, area)) << labels[i];
    EXPECT_NEAR(b.w, text_width(labels[i]), 1e-9) << labels[i];
    for (size_t j = 0; j < placed.size(); ++j) {
      if (j == i || !placed[j].shown) continue;
      EXPECT_FALSE(b.overlaps(placed[j].box)) << labels[i] << " / " << labels[j];
    }
    for (auto [x, y] : points) EXPECT_FALSE(b.overlaps({x - 3.5, y - 3.5, 7, 7})) << labels[i] << " covers a point";
  }
  EXPECT_GE(shown, 4u);                                                        // the cluster's outer points get theirs
  EXPECT_LT(shown, points.size());                                             // but not all 24: they would overlap
  for (size_t i = 24; i < 27; ++i) EXPECT_TRUE(placed[i].shown) << labels[i];  // the corners turn inwards
  EXPECT_LT(placed[24].box.x, points[24].first);                               // fp32: to the left
  EXPECT_GT(placed[24].box.y, points[24].second);                              // and below
  EXPECT_THROW(place_labels(points, {"x"}, {}, area), Error);

  // Through svg_chart: every labelled point names its label in a hover title; the labels drawn are
  // the ones placed.
  ChartSeries s{"configurations", "#1f77b4", {}, false, {}};
  for (int i = 0; i < 24; ++i) {
    s.points.emplace_back(100 + (i % 6) * 0.5, 80 + (i / 6) * 0.3);
    s.labels.push_back("c&" + std::to_string(i));
  }
  s.points.emplace_back(150, 90), s.labels.push_back("far");
  const std::string svg = svg_chart("acc", {s}, "latency");
  EXPECT_EQ(count_of(svg, "<title>c&amp;"), 24u);  // escaped
  const size_t drawn = count_of(svg, "fill='#1f77b4'>c&amp;");
  EXPECT_GE(drawn, 2u);
  EXPECT_LT(drawn, 24u);
  EXPECT_EQ(count_of(svg, ">far</text>"), 1u);
}

// The heat map: a row per name, a cell per finite value (NaN blank), more than 240 columns binned
// with a spike kept (the bin's largest value), one layer at one step drawn with one x tick.
TEST(Charts, HeatMapRowsColumnsAndBlankNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  HeatMap m{{"conv1", "layer1.0.conv1", "layer1.0.conv2"}, {50, 100, 150, 200}, {}, {}};
  m.values = {{0.01, 0.02, 0.03, 0.04}, {nan, 0.2, 0.1, 0.05}, {0.001, 0.002, 0.004, 0.008}};
  std::string svg = svg_heat_map("d_c", m, "step", "d_c");
  EXPECT_EQ(count_of(svg, "<rect class='c'"), 11u);  // 12 cells, one NaN
  EXPECT_EQ(count_of(svg, "<g><title>"), 3u);
  EXPECT_LT(svg.find(">conv1<"), svg.find(">layer1.0.conv1<"));  // the rows in the order given
  EXPECT_LT(svg.find(">layer1.0.conv1<"), svg.find(">layer1.0.conv2<"));
  EXPECT_NE(svg.find("(log scale)"), std::string::npos);  // 0.001 to 0.2
  EXPECT_NE(svg.find(">100</text>"), std::string::npos);  // a round step tick

  // 1000 steps binned into 240 columns; the spike at one step still shows at the top colour.
  HeatMap many{{"a"}, {}, {}, {{}}};
  for (int i = 0; i < 1000; ++i) many.x.push_back(10.0 * (i + 1)), many.values[0].push_back(i == 517 ? 1.0 : 0.1);
  const HeatMap binned = bin_columns(many, 240);
  ASSERT_EQ(binned.x.size(), 240u);
  ASSERT_EQ(binned.x_end.size(), 240u);
  EXPECT_EQ(binned.x.front(), 10.0);
  EXPECT_EQ(binned.x_end.back(), 10000.0);
  EXPECT_EQ(*std::max_element(binned.values[0].begin(), binned.values[0].end()), 1.0);
  svg = svg_heat_map("d_c", many, "step", "d_c");
  EXPECT_EQ(count_of(svg, "<rect class='c'"), 240u);
  EXPECT_EQ(count_of(svg, "fill='#fde725'"), 1u);  // the spike's cell, at the top of the colour map
  EXPECT_NE(svg.find("1000 records in 240 columns"), std::string::npos);

  // One layer, one step: one cell, one x tick (no 0.2-step ticks around a single step).
  svg = svg_heat_map("d_c", {{"conv"}, {30}, {}, {{0.5}}}, "step", "d_c");
  EXPECT_EQ(count_of(svg, "<rect class='c'"), 1u);
  EXPECT_NE(svg.find(">30</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">30.2</text>"), std::string::npos);
  // Nothing finite: no map.
  EXPECT_NE(svg_heat_map("d_c", {{"conv"}, {30}, {}, {{nan}}}, "step", "d_c").find("no data yet"), std::string::npos);
  EXPECT_THROW(svg_heat_map("d_c", {{"conv"}, {30, 20}, {}, {{0.1, 0.2}}}, "step", "d_c"), Error);  // x descends
  EXPECT_THROW(svg_heat_map("d_c", {{"conv"}, {30, 40}, {}, {{0.1}}}, "step", "d_c"), Error);
}

// An epoch axis starts at 0 (the first record at epoch 0.4 was the axis' start), a latency axis at
// its data; a cosine learning rate stays on a linear axis (a log one flattened it into its tail).
TEST(Charts, EpochAxisFromZeroAndLinearLearningRate) {
  ChartSeries lr{"lr", "#2ca02c", {}, true, {}};
  for (int i = 1; i <= 24; ++i) lr.points.emplace_back(0.4 * i, 0.05 * (1 + std::cos(3.14159265 * i / 25)));
  const std::string linear = svg_chart("learning rate", {lr}, "epoch", false);
  EXPECT_EQ(linear.find("(log y axis)"), std::string::npos);
  EXPECT_NE(linear.find("text-anchor='middle'>0</text>"), std::string::npos) << linear;
  EXPECT_NE(svg_chart("learning rate", {lr}).find("(log y axis)"), std::string::npos);  // as before, where asked
  ChartSeries latency{"latency", "#1f77b4", {{50, 1}, {60, 2}}, true, {}};
  EXPECT_EQ(svg_chart("q", {latency}, "latency").find("text-anchor='middle'>0</text>"), std::string::npos);
}

}  // namespace
}  // namespace octet::train
