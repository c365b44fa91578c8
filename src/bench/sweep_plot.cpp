#include "bench/sweep_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kite::bench {
namespace {

constexpr double kWidth = 520, kHeight = 340;
constexpr double kLeft = 70, kRight = 20, kTop = 36, kBottom = 50;

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" step (1, 2 or 5 × 10^k) giving about `n` ticks over [0, max].
double nice_step(double max, int n) {
  if (!(max > 0)) return 1;
  const double raw = max / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

std::string format_tick(double v) { return fmt::format("{:g}", std::round(v * 1e6) / 1e6); }

}  // namespace

std::string render_line_chart_svg(const std::string& title, const std::string& y_label,
                                  const std::vector<double>& x,
                                  const std::vector<PlotSeries>& series) {
  // x positions: finite rates as they are, +inf one "slot" past the largest finite rate.
  double max_finite = 0;
  for (double v : x)
    if (std::isfinite(v)) max_finite = std::max(max_finite, v);
  const double inf_x = max_finite > 0 ? max_finite * 1.25 : 1.0;
  std::vector<double> px;
  for (double v : x) px.push_back(std::isfinite(v) ? v : inf_x);
  const bool has_inf = std::any_of(x.begin(), x.end(), [](double v) { return std::isinf(v); });
  const double x_max = std::max(has_inf ? inf_x : max_finite, 1e-9);
  double y_max = 0;
  for (const auto& s : series)
    for (double v : s.y)
      if (std::isfinite(v)) y_max = std::max(y_max, v);
  const double y_step = nice_step(y_max, 5);
  const double y_top = std::max(y_step, std::ceil(y_max / y_step) * y_step);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto sx = [&](double v) { return kLeft + v / x_max * plot_w; };
  auto sy = [&](double v) { return kTop + plot_h - v / y_top * plot_h; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" "
      "font-weight=\"bold\">{3}</text>\n",
      kWidth, kHeight, kWidth / 2, escape_xml(title));
  for (double v = 0; v <= y_top + y_step / 2; v += y_step)
    svg += fmt::format(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        kLeft, kLeft + plot_w, sy(v), kLeft - 6, sy(v) + 4, format_tick(v));
  for (size_t i = 0; i < x.size(); ++i)
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#999\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        sx(px[i]), kTop + plot_h, kTop + plot_h + 5, kTop + plot_h + 18,
        std::isinf(x[i]) ? std::string("inf") : format_tick(x[i]));
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">request rate (req/s)</text>\n"
      "<text transform=\"translate(16 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      kLeft, kTop, plot_w, plot_h, kLeft + plot_w / 2, kHeight - 8, kTop + plot_h / 2,
      escape_xml(y_label));
  for (size_t k = 0; k < series.size(); ++k) {
    const PlotSeries& s = series[k];
    std::string points;
    for (size_t i = 0; i < x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.y[i])) points += fmt::format("{:.1f},{:.1f} ", sx(px[i]), sy(s.y[i]));
    svg +=
        fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n",
                    points, s.color, s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    for (size_t i = 0; i < x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.y[i]))
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", sx(px[i]),
                           sy(s.y[i]), s.color);
    const double ly = kTop + 14 + 16 * static_cast<double>(k);
    svg += fmt::format(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"2\"{4}/>"
        "<text x=\"{5}\" y=\"{6}\">{7}</text>\n",
        kLeft + 10, kLeft + 34, ly, s.color, s.dashed ? " stroke-dasharray=\"6 4\"" : "",
        kLeft + 40, ly + 4, escape_xml(s.name));
  }
  svg += "</svg>\n";
  return svg;
}

std::string render_sweep_html(const std::vector<ServeRun>& runs, const std::string& title) {
  std::vector<double> x;
  PlotSeries ttft50{"TTFT p50", "#1f77b4", false, {}}, ttft99{"TTFT p99", "#1f77b4", true, {}};
  PlotSeries tpot50{"TPOT p50", "#d62728", false, {}}, tpot99{"TPOT p99", "#d62728", true, {}};
  for (const auto& r : runs) {
    x.push_back(r.config.request_rate);
    ttft50.y.push_back(r.metrics.ttft_ms.p50);
    ttft99.y.push_back(r.metrics.ttft_ms.p99);
    tpot50.y.push_back(r.metrics.tpot_ms.p50);
    tpot99.y.push_back(r.metrics.tpot_ms.p99);
  }
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:20px}} td,th{{padding:2px 10px;text-align:right}}"
      " table{{border-collapse:collapse}} "
      "tr:nth-child(even){{background:#f3f3f3}}</style></head><body>\n"
      "<h2>{0}</h2>\n<div>\n",
      escape_xml(title));
  html += render_line_chart_svg("Time to first token", "TTFT (ms)", x, {ttft50, ttft99});
  html += render_line_chart_svg("Time per output token", "TPOT (ms)", x, {tpot50, tpot99});
  html +=
      "</div>\n<table>\n<tr><th>rate (req/s)</th><th>completed</th><th>failed</th><th>req/s</th>"
      "<th>out tok/s</th><th>goodput</th><th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th>"
      "<th>TPOT p99</th><th>ITL p99</th><th>E2E p50</th></tr>\n";
  for (const auto& r : runs) {
    const ServeMetrics& m = r.metrics;
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td><td>{:.1f}</td><td>{}</td><td>{:.1f}</"
        "td>"
        "<td>{:.1f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.1f}</td></tr>\n",
        std::isinf(r.config.request_rate) ? std::string("inf") : format_tick(r.config.request_rate),
        m.completed, m.failed, m.request_throughput, m.output_throughput,
        m.goodput ? fmt::format("{:.2f}", *m.goodput) : "-", m.ttft_ms.p50, m.ttft_ms.p99,
        m.tpot_ms.p50, m.tpot_ms.p99, m.itl_ms.p99, m.e2e_ms.p50);
  }
  html +=
      "</table>\n<p>Latencies in ms. Generated by <code>kite bench "
      "serve</code>.</p>\n</body></html>\n";
  return html;
}

}  // namespace kite::bench
