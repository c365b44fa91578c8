// A self-contained HTML page (inline SVG, no scripts or external assets) plotting a
// request-rate sweep of `kite bench serve`: TTFT p50/p99 and TPOT p50/p99 against the
// request rate, plus a table of the numbers. A rate of +inf is drawn at the right end of
// the axis and labelled "inf".
#pragma once

#include <string>
#include <vector>

#include "bench/serve_bench.h"

namespace kite::bench {

struct PlotSeries {
  std::string name;
  std::string color;  // CSS color
  bool dashed = false;
  std::vector<double> y;  // one per x
};

// One line chart as an <svg> element; `x` may contain +inf (see above).
std::string render_line_chart_svg(const std::string& title, const std::string& y_label,
                                  const std::vector<double>& x,
                                  const std::vector<PlotSeries>& series);

std::string render_sweep_html(const std::vector<ServeRun>& runs, const std::string& title);

}  // namespace kite::bench
