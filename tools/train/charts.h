// SVG charts for the pages a person reads (curves.html, sweep.html): line and point charts with
// round ticks and point labels that do not collide, the building blocks of tools/train/metrics.h's curves and `octet
// sweep`'s chart.
//   ChartSeries s{"train", "#1f77b4", {{1, 2.3}, {2, 1.9}}};
//   std::string svg = svg_chart("loss", {s});
// and heat maps (svg_heat_map: the INT8 layers' d_c, layer x step).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace octet::train {

// One SVG chart (the pages' building block; `octet sweep` draws with it too): a polyline per
// series (or, with line false, its points alone, each with its label if given: place_labels),
// axes scaled to the data, the series' names as a legend.
struct ChartSeries {
  std::string name, color;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool line = true;
  std::vector<std::string> labels;  // per point, optional
};
// The x axis starts at 0 where the data starts near it (epochs: the first record is at 0.4, which
// was the axis' start); the y axis is logarithmic where the values span decades, unless `log_y` is false (a
// learning rate: a cosine decay to 0 would flatten into its last steps).
std::string svg_chart(const std::string& title, const std::vector<ChartSeries>& series,
                      const std::string& x_label = "epoch", bool log_y = true);

// A chart axis with round ticks: 1, 2 or 5 times a power of ten apart, the range widened to the
// outer ticks (a single value gets a range around it); `log` (values > 0 spanning 100x or more):
// ticks at powers of ten (and 2x, 5x where there are few decades), positions in log10.
struct ChartAxis {
  double lo = 0, hi = 1;  // in axis units (log10 of the value when log)
  bool log = false;
  std::vector<double> ticks;       // values
  std::vector<std::string> names;  // their labels ("0.05", "1e-05", "20k")
  double pos(double v) const;      // 0 at lo, 1 at hi
};
ChartAxis chart_axis(double lo, double hi, bool allow_log);

// A heat map: a row per name (top to bottom), a column per x (ascending: the steps logged), a cell
// coloured by its value on a colour bar with round ticks (log where the values span 100x or more);
// NaN cells are left blank. More than 240 columns are binned, each bin the largest value of its
// columns, so that a spike stays in sight (an INT8 layer's d_c before a divergence).
//   svg_heat_map("d_c", {{"conv1", "conv2"}, {50, 100}, {}, {{0.1, 0.2}, {NAN, 0.3}}}, "step", "d_c");
struct HeatMap {
  std::vector<std::string> rows;
  std::vector<double> x;                    // per column: its first x
  std::vector<double> x_end;                // per column: its last x (binned columns); empty: x
  std::vector<std::vector<double>> values;  // [row][column]
};
std::string svg_heat_map(const std::string& title, const HeatMap& map, const std::string& x_label,
                         const std::string& value_label);
// At most `max_columns` columns, each the largest finite value of the columns it bins (NaN where
// they have none).
HeatMap bin_columns(const HeatMap& m, size_t max_columns);

// Point labels that cover no point, no other label and stay inside `area` (in pixels; x, y: the
// top left corner): each label, in order, takes the first free place beside its point (right,
// left, above, below, then the diagonals); one with no free place is not shown (svg_chart keeps it
// in the point's hover title). `marks`: every point drawn, labelled or not.
struct LabelBox {
  double x = 0, y = 0, w = 0, h = 0;
  bool overlaps(const LabelBox& o) const;
};
struct PlacedLabel {
  bool shown = false;
  LabelBox box;
};
constexpr double kLabelHeight = 12, kLabelBaseline = 9.5;  // at 11 px: the box's height, its text's baseline
std::vector<PlacedLabel> place_labels(const std::vector<std::pair<double, double>>& points,
                                      const std::vector<std::string>& labels,
                                      const std::vector<std::pair<double, double>>& marks, const LabelBox& area);

// The width of `s` in pixels at `font_px`, estimated (a little wide) from its length.
double text_width(const std::string& s, double font_px = 11);
// `s` as XML text or attribute value (<, >, & and ' escaped).
std::string xml_text(const std::string& s);

}  // namespace octet::train
