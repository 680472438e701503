#include "tools/train/charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/error.h"

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

std::string xml_text(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '\'')
      out += "&#39;";
    else
      out += c;
  }
  return out;
}

double text_width(const std::string& s, double font_px) {
  // 0.62 em a character: DejaVu Sans's digits and lower case (the sans-serif of Debian's Chromium)
  // measure 0.55 to 0.64 em; an estimate a little wide keeps neighbours apart.
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;  // UTF-8: count code points
  return 0.62 * font_px * static_cast<double>(chars);
}

bool LabelBox::overlaps(const LabelBox& o) const {
  return x < o.x + o.w && o.x < x + w && y < o.y + o.h && o.y < y + h;
}

std::vector<PlacedLabel> place_labels(const std::vector<std::pair<double, double>>& points,
                                      const std::vector<std::string>& labels,
                                      const std::vector<std::pair<double, double>>& marks, const LabelBox& area) {
  OCTET_CHECK(points.size() == labels.size(), "place_labels: ", points.size(), " points but ", labels.size(),
              " labels");
  constexpr double kGap = 5, kMark = 4;  // px from the point's centre; a point's half size
  std::vector<LabelBox> taken;
  for (auto [x, y] : marks) taken.push_back({x - kMark, y - kMark, 2 * kMark, 2 * kMark});
  std::vector<PlacedLabel> out(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    const auto [x, y] = points[i];
    const double w = text_width(labels[i]), h = kLabelHeight;
    // Right, left, above, below, then the four diagonals.
    const LabelBox tries[] = {{x + kGap, y - h / 2, w, h},      {x - kGap - w, y - h / 2, w, h},
                              {x - w / 2, y - kGap - h, w, h},  {x - w / 2, y + kGap, w, h},
                              {x + kMark, y - kMark - h, w, h}, {x - kMark - w, y - kMark - h, w, h},
                              {x + kMark, y + kMark, w, h},     {x - kMark - w, y + kMark, w, h}};
    for (const LabelBox& b : tries) {
      const bool inside =
          b.x >= area.x && b.y >= area.y && b.x + b.w <= area.x + area.w && b.y + b.h <= area.y + area.h;
      if (!inside || labels[i].empty()) continue;
      if (std::any_of(taken.begin(), taken.end(), [&](const LabelBox& o) { return b.overlaps(o); })) continue;
      out[i] = {true, b};
      taken.push_back(b);
      break;
    }
  }
  return out;
}

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
  // At most ~10 ticks; the bound also ends the loop where k0 + 1 == k0 (values near 1e16 steps).
  for (double k = k0, i = 0; k <= std::max(k1, k0 + 1) && i < 16; ++k, ++i) {
    const double v = std::abs(k) < 0.5 ? 0.0 : k * step;  // an exact 0, not 1e-17
    a.ticks.push_back(v);
    a.names.push_back(tick_name(v, step));
  }
  return a;
}

std::string svg_chart(const std::string& title, const std::vector<ChartSeries>& series, const std::string& x_label,
                      bool log_y) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y) || !std::isfinite(x)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  std::ostringstream os;
  os << "<figure><figcaption>" << xml_text(title) << "</figcaption>";
  if (!std::isfinite(x0)) return os.str() + "<p>no data yet</p></figure>";
  // Values spanning decades (a learning rate decayed to 0.001x, a perplexity from thousands down)
  // get a log y axis; the x axis (epochs, steps, latency) stays linear.
  // x from 0 where the data starts near it (an epoch axis whose first record is at 0.4).
  const bool from_zero = x0 >= 0 && x0 <= x1 - x0;
  const ChartAxis ax = chart_axis(from_zero ? 0.0 : x0, x1, false), ay = chart_axis(y0, y1, log_y);
  // The legend in a strip above the plot, never over the data; room on the left for the y labels
  // and on the right for the last x label.
  // The legend's entries left to right, on as many lines of 16 px as they need (8 INT8 layers
  // take two or three).
  const double w = 560, l = 64, b = 36, r = 28, line_h = 16;
  std::vector<std::pair<double, double>> legend_at(series.size(), {-1, -1});  // per series: x, line
  double legend_x = l, legend_line = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    if (series[i].points.empty()) continue;
    const double entry = 14 + text_width(series[i].name);
    if (legend_x > l && legend_x + entry > w - r) legend_x = l, ++legend_line;
    legend_at[i] = {legend_x, legend_line};
    legend_x += entry + 16;
  }
  const double t = 26 + line_h * legend_line, h = 238 + t;  // the plot 202 px high whatever the legend
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
  os << "<text x='" << (l + w - r) / 2 << "' y='" << h - 4 << "' text-anchor='middle'>" << xml_text(x_label)
     << (ay.log ? " (log y axis)" : "") << "</text>";
  for (size_t i = 0; i < series.size(); ++i) {
    if (legend_at[i].first < 0) continue;
    const double y = 8 + line_h * legend_at[i].second;
    os << "<rect x='" << legend_at[i].first << "' y='" << y << "' width='10' height='10' fill='" << series[i].color
       << "'/><text x='" << legend_at[i].first + 14 << "' y='" << y + 9 << "'>" << xml_text(series[i].name)
       << "</text>";
  }
  // Lines first, then the points over them, then the labels over both. Labels go where they cover
  // no point, no other label and do not leave the plot (place_labels); one that fits nowhere is
  // left out, and its point's hover title names it.
  std::vector<std::pair<double, double>> marks, labelled;
  std::vector<std::string> texts, label_colors;
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
           << "'>";
        if (i < s.labels.size()) {
          os << "<title>" << xml_text(s.labels[i]) << "</title>";
          labelled.emplace_back(px(x), py(y)), texts.push_back(s.labels[i]), label_colors.push_back(s.color);
        }
        os << "</circle>";
        marks.emplace_back(px(x), py(y));
      }
  }
  const std::vector<PlacedLabel> placed = place_labels(labelled, texts, marks, {l, t, w - l - r, h - t - b});
  for (size_t i = 0; i < placed.size(); ++i)
    if (placed[i].shown)
      // A white halo keeps a label readable where it crosses a line.
      os << "<text x='" << placed[i].box.x << "' y='" << placed[i].box.y + kLabelBaseline
         << "' stroke='white' stroke-width='3' paint-order='stroke' fill='" << label_colors[i] << "'>"
         << xml_text(texts[i]) << "</text>";
  return os.str() + "</svg></figure>";
}

namespace {

// A colour for t in [0, 1]: viridis (matplotlib's, at ten of its stops), dark blue to yellow, whose
// lightness rises steadily, so it reads in grey too.
std::string heat_color(double t) {
  static const unsigned kStops[] = {0x440154, 0x482878, 0x3e4989, 0x31688e, 0x26828e,
                                    0x1f9e89, 0x35b779, 0x6ece58, 0xb5de2b, 0xfde725};
  constexpr int kLast = 9;
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * kLast;
  const int i = std::min(static_cast<int>(t), kLast - 1);
  const double f = t - i;
  char buf[8];
  int rgb[3];
  for (int c = 0; c < 3; ++c) {
    const int shift = 16 - 8 * c;
    const double a = (kStops[i] >> shift) & 0xff, b = (kStops[i + 1] >> shift) & 0xff;
    rgb[c] = static_cast<int>(std::lround(a + f * (b - a)));
  }
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buf;
}

// A row name no longer than `max_chars`: its middle cut out (the start names the block, the end the layer).
std::string shortened(const std::string& s, size_t max_chars) {
  if (s.size() <= max_chars) return s;
  const size_t head = (max_chars - 1) / 2, tail = max_chars - 1 - head;
  return s.substr(0, head) + "\u2026" + s.substr(s.size() - tail);
}

}  // namespace

HeatMap bin_columns(const HeatMap& m, size_t max_columns) {
  const size_t n = m.x.size();
  if (n <= max_columns || max_columns == 0) return m;
  HeatMap out{m.rows, {}, {}, std::vector<std::vector<double>>(m.rows.size())};
  for (size_t b = 0; b < max_columns; ++b) {
    const size_t c0 = b * n / max_columns, c1 = (b + 1) * n / max_columns;  // columns [c0, c1)
    out.x.push_back(m.x[c0]);
    out.x_end.push_back(m.x_end.empty() ? m.x[c1 - 1] : m.x_end[c1 - 1]);
    for (size_t r = 0; r < m.rows.size(); ++r) {
      double v = std::numeric_limits<double>::quiet_NaN();
      for (size_t c = c0; c < c1; ++c)
        if (std::isfinite(m.values[r][c]) && !(m.values[r][c] <= v)) v = m.values[r][c];
      out.values[r].push_back(v);
    }
  }
  return out;
}

std::string svg_heat_map(const std::string& title, const HeatMap& map, const std::string& x_label,
                         const std::string& value_label) {
  constexpr size_t kMaxColumns = 240, kMaxNameChars = 32;
  for (const auto& row : map.values)
    OCTET_CHECK(row.size() == map.x.size(), "svg_heat_map: a row of ", row.size(), " values for ", map.x.size(),
                " columns");
  for (size_t j = 1; j < map.x.size(); ++j)
    OCTET_CHECK(map.x[j] > map.x[j - 1], "svg_heat_map: the columns' x must ascend, got ", map.x[j - 1], " then ",
                map.x[j]);
  OCTET_CHECK(map.values.size() == map.rows.size(), "svg_heat_map: ", map.values.size(), " rows of values for ",
              map.rows.size(), " row names");
  const HeatMap m = bin_columns(map, kMaxColumns);
  double v0 = std::numeric_limits<double>::infinity(), v1 = -v0;
  for (const auto& row : m.values)
    for (double v : row)
      if (std::isfinite(v)) v0 = std::min(v0, v), v1 = std::max(v1, v);
  std::ostringstream os;
  os << "<figure><figcaption>" << xml_text(title) << "</figcaption>";
  if (m.rows.empty() || !std::isfinite(v0)) return os.str() + "<p>no data yet</p></figure>";
  const size_t n = m.x.size();
  // Column j spans from half way to its left neighbour to half way to its right one (the steps
  // need not be evenly spaced: a resume, an epoch's last short interval); the outer ones as far out.
  auto last_x = [&](size_t j) { return m.x_end.empty() ? m.x[j] : m.x_end[j]; };
  std::vector<double> edge(n + 1);
  for (size_t j = 1; j < n; ++j) edge[j] = (last_x(j - 1) + m.x[j]) / 2;
  edge[0] = m.x[0] - (n > 1 ? edge[1] - last_x(0) : 0.5);
  edge[n] = last_x(n - 1) + (n > 1 ? m.x[n - 1] - edge[n - 1] : 0.5);

  // Rows of 11 to 20 px (50 layers: 550 px), names at 10 px on the left, the colour bar above.
  const double row_h = std::clamp(480.0 / static_cast<double>(m.rows.size()), 11.0, 20.0), font = 10;
  double name_w = 0;
  for (const auto& r : m.rows) name_w = std::max(name_w, text_width(shortened(r, kMaxNameChars), font));
  const double l = name_w + 10, t = 50, plot_w = 600, r = 24, b = 36, plot_h = row_h * m.rows.size();
  const double w = l + plot_w + r, h = t + plot_h + b;
  auto px = [&](double x) { return l + (x - edge[0]) / (edge[n] - edge[0]) * plot_w; };
  const ChartAxis color = chart_axis(v0, v1, true);
  auto color_at = [&](double v) { return heat_color(color.log && v <= 0 ? 0.0 : color.pos(v)); };
  os << "<svg width='" << w << "' height='" << h << "' xmlns='http://www.w3.org/2000/svg' font-size='" << font << "'>";
  // The colour bar: 60 steps of the colour map, ticks under it.
  constexpr int kBarSteps = 60;
  const double bar_w = 240, bar_y = 8, bar_h = 10;
  for (int i = 0; i < kBarSteps; ++i)
    os << "<rect x='" << l + bar_w * i / kBarSteps << "' y='" << bar_y << "' width='" << bar_w / kBarSteps + 0.3
       << "' height='" << bar_h << "' fill='" << heat_color((i + 0.5) / kBarSteps) << "'/>";
  os << "<rect x='" << l << "' y='" << bar_y << "' width='" << bar_w << "' height='" << bar_h
     << "' fill='none' stroke='#999'/>";
  for (size_t i = 0; i < color.ticks.size(); ++i) {
    const double x = l + color.pos(color.ticks[i]) * bar_w;
    os << "<line x1='" << x << "' x2='" << x << "' y1='" << bar_y + bar_h << "' y2='" << bar_y + bar_h + 3
       << "' stroke='#666'/><text x='" << x << "' y='" << bar_y + bar_h + 13 << "' text-anchor='middle'>"
       << color.names[i] << "</text>";
  }
  os << "<text x='" << l + bar_w + 12 << "' y='" << bar_y + bar_h - 1 << "'>" << xml_text(value_label)
     << (color.log ? " (log scale)" : "") << "; blank: not logged</text>";
  // The cells, a row at a time, each row's name on its left (the whole name in its hover title).
  for (size_t i = 0; i < m.rows.size(); ++i) {
    const double y = t + row_h * static_cast<double>(i);
    os << "<g><title>" << xml_text(m.rows[i]) << "</title><text x='" << l - 4 << "' y='" << y + row_h / 2 + 3.5
       << "' text-anchor='end'>" << xml_text(shortened(m.rows[i], kMaxNameChars)) << "</text>";
    for (size_t j = 0; j < n; ++j) {
      const double v = m.values[i][j];
      if (!std::isfinite(v)) continue;  // not logged (before the layer's first backward pass), or NaN
      // A hair wider than the column, so neighbours meet without a seam.
      os << "<rect class='c' x='" << px(edge[j]) << "' y='" << y << "' width='" << px(edge[j + 1]) - px(edge[j]) + 0.4
         << "' height='" << row_h << "' fill='" << color_at(v) << "'/>";
    }
    os << "</g>";
  }
  os << "<rect x='" << l << "' y='" << t << "' width='" << plot_w << "' height='" << plot_h
     << "' fill='none' stroke='#999'/>";
  // x ticks: round steps inside the columns' span (whole ones where the x are whole: steps).
  const bool whole = std::all_of(m.x.begin(), m.x.end(), [](double x) { return x == std::floor(x); });
  const ChartAxis ax = chart_axis(m.x.front(), last_x(n - 1), false);
  for (size_t i = 0; i < ax.ticks.size(); ++i) {
    const double x = ax.ticks[i];
    if (x < edge[0] || x > edge[n] || (whole && x != std::floor(x))) continue;
    os << "<line x1='" << px(x) << "' x2='" << px(x) << "' y1='" << t + plot_h << "' y2='" << t + plot_h + 3
       << "' stroke='#666'/><text x='" << px(x) << "' y='" << t + plot_h + 14 << "' text-anchor='middle'>"
       << ax.names[i] << "</text>";
  }
  os << "<text x='" << l + plot_w / 2 << "' y='" << h - 6 << "' text-anchor='middle'>" << xml_text(x_label)
     << (m.x.size() < map.x.size()
             ? " (" + std::to_string(map.x.size()) + " records in " + std::to_string(n) + " columns, each the largest)"
             : std::string())
     << "</text>";
  return os.str() + "</svg></figure>";
}

}  // namespace octet::train
