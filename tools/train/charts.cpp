#include "tools/train/charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace octet::train {

namespace {

// A tick label: as few digits as the step needs; thousands as "k" and millions as "M" past 10^4.
std::string tick_name(double v, double step) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  char buf[32];
  if (a >= 1e4 && a < 1e9 && step >= 1e3) {
    const bool mega = a >= 1e6;
    const double s = mega ? 1e6 : 1e3, d = step / s;
    const int decimals = d >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(d) - 1e-9));
    std::snprintf(buf, sizeof buf, "%.*f%s", decimals, v / s, mega ? "M" : "k");
  } else if (a >= 1e-3 && a < 1e4) {
    const int decimals = step >= 1 ? 0 : std::min(9, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  }
  return buf;
}

}  // namespace

double ChartAxis::pos(double v) const {
  const double u = log ? std::log10(v) : v;
  return (u - lo) / (hi - lo);
}

ChartAxis chart_axis(double lo, double hi, bool allow_log) {
  ChartAxis a;
  if (allow_log && lo > 0 && hi / lo >= 100) {
    a.log = true;
    const int d0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9)),
              d1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
    a.lo = d0, a.hi = std::max(d1, d0 + 1);
    const int stride = std::max(1, (static_cast<int>(a.hi) - d0 + 5) / 6);  // at most ~6 decade ticks
    for (int d = d0; d <= a.hi; d += stride) {
      for (double m : (a.hi - d0 <= 2 ? std::vector<double>{1, 2, 5} : std::vector<double>{1})) {
        const double v = m * std::pow(10.0, d);
        if (std::log10(v) > a.hi + 1e-9) break;
        a.ticks.push_back(v);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        a.names.push_back(buf);
      }
    }
    return a;
  }
  if (hi == lo) {  // one value: a range around it
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  const double raw = (hi - lo) / 4, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
  const double k0 = std::floor(lo / step + 1e-9), k1 = std::ceil(hi / step - 1e-9);
  // The outer ticks, or the data where k * step rounded just inside it.
  a.lo = std::min(k0 * step, lo), a.hi = std::max(std::max(k1, k0 + 1) * step, hi);
  for (double k = k0; k <= std::max(k1, k0 + 1); ++k) {
    const double v = std::abs(k) < 0.5 ? 0.0 : k * step;  // an exact 0, not 1e-17
    a.ticks.push_back(v);
    a.names.push_back(tick_name(v, step));
  }
  return a;
}

std::string svg_chart(const std::string& title, const std::vector<ChartSeries>& series, const std::string& x_label) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y) || !std::isfinite(x)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  std::ostringstream os;
  os << "<figure><figcaption>" << title << "</figcaption>";
  if (!std::isfinite(x0)) return os.str() + "<p>no data yet</p></figure>";
  // Values spanning decades (a learning rate decayed to 0.001x, a perplexity from thousands down)
  // get a log y axis; the x axis (epochs, steps, latency) stays linear.
  const ChartAxis ax = chart_axis(x0, x1, false), ay = chart_axis(y0, y1, true);
  // The legend in a strip above the plot, never over the data; room on the left for the y labels
  // and on the right for the last x label.
  const double w = 560, h = 264, l = 64, b = 36, t = 26, r = 28;
  auto px = [&](double x) { return l + ax.pos(x) * (w - l - r); };
  auto py = [&](double y) { return t + (1 - ay.pos(y)) * (h - t - b); };
  os << "<svg width='" << w << "' height='" << h << "' xmlns='http://www.w3.org/2000/svg' font-size='11'>";
  os << "<rect x='" << l << "' y='" << t << "' width='" << w - l - r << "' height='" << h - t - b
     << "' fill='none' stroke='#999'/>";
  for (size_t i = 0; i < ay.ticks.size(); ++i) {
    const double y = py(ay.ticks[i]);
    os << "<line x1='" << l << "' x2='" << w - r << "' y1='" << y << "' y2='" << y << "' stroke='#eee'/>";
    os << "<text x='" << l - 4 << "' y='" << y + 4 << "' text-anchor='end'>" << ay.names[i] << "</text>";
  }
  for (size_t i = 0; i < ax.ticks.size(); ++i)
    os << "<text x='" << px(ax.ticks[i]) << "' y='" << h - 20 << "' text-anchor='middle'>" << ax.names[i] << "</text>";
  os << "<text x='" << (l + w - r) / 2 << "' y='" << h - 4 << "' text-anchor='middle'>" << x_label
     << (ay.log ? " (log y axis)" : "") << "</text>";
  double legend_x = l;
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    os << "<rect x='" << legend_x << "' y='8' width='10' height='10' fill='" << s.color << "'/><text x='"
       << legend_x + 14 << "' y='17'>" << s.name << "</text>";
    legend_x += 14 + 6.5 * static_cast<double>(s.name.size()) + 16;  // ~6.5 px a character at 11 px
  }
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    if (s.line) {
      os << "<polyline fill='none' stroke='" << s.color << "' stroke-width='1.5' points='";
      for (auto [x, y] : s.points)
        if (std::isfinite(y) && std::isfinite(x) && (!ay.log || y > 0)) os << px(x) << "," << py(y) << " ";
      os << "'/>";
    }
    if (!s.line || s.points.size() <= 60)  // few points (per-epoch test results): mark each one
      for (size_t i = 0; i < s.points.size(); ++i) {
        auto [x, y] = s.points[i];
        if (!std::isfinite(y) || !std::isfinite(x) || (ay.log && y <= 0)) continue;
        os << "<circle cx='" << px(x) << "' cy='" << py(y) << "' r='" << (s.line ? 2.5 : 3.5) << "' fill='" << s.color
           << "'/>";
        // A point label to the point's left where it would run past the plot's right edge.
        if (i < s.labels.size()) {
          const bool left = px(x) + 5 + 6.5 * static_cast<double>(s.labels[i].size()) > w - r;
          os << "<text x='" << px(x) + (left ? -5 : 5) << "' y='" << py(y) - 4 << "' fill='" << s.color << "'"
             << (left ? " text-anchor='end'" : "") << ">" << s.labels[i] << "</text>";
        }
      }
  }
  return os.str() + "</svg></figure>";
}

}  // namespace octet::train
