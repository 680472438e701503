// SVG charts for the pages a person reads (curves.html, sweep.html): line and point charts with
// round ticks, the building blocks of tools/train/metrics.h's curves and `octet sweep`'s chart.
//   ChartSeries s{"train", "#1f77b4", {{1, 2.3}, {2, 1.9}}};
//   std::string svg = svg_chart("loss", {s});
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace octet::train {

// One SVG chart (the pages' building block; `octet sweep` draws with it too): a polyline per
// series (or, with line false, its points alone, each with its label if given), axes scaled to the
// data, the series' names as a legend.
struct ChartSeries {
  std::string name, color;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool line = true;
  std::vector<std::string> labels;  // per point, optional
};
std::string svg_chart(const std::string& title, const std::vector<ChartSeries>& series,
                      const std::string& x_label = "epoch");

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

}  // namespace octet::train
