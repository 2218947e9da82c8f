#include "trainer/report/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "base/json_text.h"

namespace granary {
namespace {

struct Point {
  double x, y;
};

struct Series {
  std::string name;
  std::vector<Point> points;
  bool markers = true;  // a dot per point (per-epoch values); off for step curves
};

struct Chart {
  std::string id, title, y_label;
  std::vector<Series> series;
  bool from_zero = false;  // the y axis starts at 0
};

// Line colours, in series order.
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : Printable(text)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
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

std::string Format(const char* format, double v) {
  char text[48];
  std::snprintf(text, sizeof(text), format, v);
  return text;
}

// One chart as an inline <svg>: axes with ticks, a polyline per series.
std::string Svg(const Chart& chart) {
  constexpr double kWidth = 560, kHeight = 260, kLeft = 64, kRight = 16, kTop = 28, kBottom = 40;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const Series& s : chart.series) {
    for (const Point& p : s.points) {
      x0 = std::min(x0, p.x), x1 = std::max(x1, p.x);
      y0 = std::min(y0, p.y), y1 = std::max(y1, p.y);
    }
  }
  if (x0 > x1) x0 = 0, x1 = 1, y0 = 0, y1 = 1;  // no data
  if (chart.from_zero) y0 = std::min(0.0, y0);
  if (x1 - x0 < 1e-12) x0 -= 0.5, x1 += 0.5;
  if (y1 - y0 < 1e-12) y0 -= 0.5, y1 += 0.5;
  const double pad = (y1 - y0) * 0.05;
  if (!(chart.from_zero && y0 == 0)) y0 -= pad;
  y1 += pad;
  auto sx = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * (kWidth - kLeft - kRight); };
  auto sy = [&](double y) { return kHeight - kBottom - (y - y0) / (y1 - y0) * (kHeight - kTop - kBottom); };

  std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"560\" height=\"260\" viewBox=\"0 0 560 260\" "
      "role=\"img\" aria-label=\"" +
      Escape(chart.title) + "\">\n";
  svg += "<text x=\"" + Format("%.0f", kLeft) + "\" y=\"18\" class=\"title\">" + Escape(chart.title) + "</text>\n";
  for (int i = 0; i <= 4; ++i) {  // y grid and labels
    const double y = y0 + (y1 - y0) * i / 4;
    svg += "<line class=\"grid\" x1=\"" + Format("%.1f", kLeft) + "\" x2=\"" + Format("%.1f", kWidth - kRight) +
           "\" y1=\"" + Format("%.1f", sy(y)) + "\" y2=\"" + Format("%.1f", sy(y)) + "\"/>\n";
    svg += "<text class=\"tick\" text-anchor=\"end\" x=\"" + Format("%.1f", kLeft - 6) + "\" y=\"" +
           Format("%.1f", sy(y) + 4) + "\">" + Format("%.4g", y) + "</text>\n";
  }
  const double first = std::ceil(x0), last = std::floor(x1);
  const double every = std::max(1.0, std::ceil((last - first + 1) / 10));
  for (double x = first; x <= last; x += every) {  // epochs on the x axis
    svg += "<text class=\"tick\" text-anchor=\"middle\" x=\"" + Format("%.1f", sx(x)) + "\" y=\"" +
           Format("%.1f", kHeight - kBottom + 16) + "\">" + Format("%.0f", x) + "</text>\n";
  }
  svg += "<text class=\"axis\" text-anchor=\"middle\" x=\"" + Format("%.1f", (kLeft + kWidth - kRight) / 2) +
         "\" y=\"" + Format("%.1f", kHeight - 6) + "\">epoch</text>\n";
  svg += "<text class=\"axis\" text-anchor=\"middle\" transform=\"rotate(-90)\" x=\"" +
         Format("%.1f", -(kTop + kHeight - kBottom) / 2) + "\" y=\"14\">" + Escape(chart.y_label) + "</text>\n";
  double legend_x = kLeft + 220;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const Series& s = chart.series[i];
    const std::string colour = kColours[i % std::size(kColours)];
    std::string points;
    for (const Point& p : s.points) points += Format("%.1f", sx(p.x)) + "," + Format("%.1f", sy(p.y)) + " ";
    svg += "<polyline class=\"series\" data-series=\"" + Escape(s.name) + "\" fill=\"none\" stroke=\"" + colour +
           "\" stroke-width=\"" + (s.markers ? "2" : "1") + "\" points=\"" + points + "\"/>\n";
    if (s.markers) {
      for (const Point& p : s.points) {
        svg += "<circle r=\"3\" fill=\"" + colour + "\" cx=\"" + Format("%.1f", sx(p.x)) + "\" cy=\"" +
               Format("%.1f", sy(p.y)) + "\"/>\n";
      }
    }
    svg += "<rect x=\"" + Format("%.1f", legend_x) + "\" y=\"10\" width=\"10\" height=\"10\" fill=\"" + colour +
           "\"/><text class=\"legend\" x=\"" + Format("%.1f", legend_x + 14) + "\" y=\"19\">" + Escape(s.name) +
           "</text>\n";
    legend_x += 24 + 7 * static_cast<double>(s.name.size());
  }
  return svg + "</svg>\n";
}

Series PerEpoch(const std::string& name, const std::vector<EpochReport>& epochs, double (*value)(const EpochReport&)) {
  Series s{name, {}};
  for (const EpochReport& e : epochs) s.points.push_back({static_cast<double>(e.epoch), value(e)});
  return s;
}

// A figure a hook added (EpochReport::figures), over the epochs that have it.
Series FigurePerEpoch(const std::string& name, const std::vector<EpochReport>& epochs, const std::string& figure) {
  Series s{name, {}};
  for (const EpochReport& e : epochs) {
    if (const std::optional<double> v = e.Number(figure)) s.points.push_back({static_cast<double>(e.epoch), *v});
  }
  return s;
}

std::vector<Chart> Charts(const std::vector<EpochReport>& epochs, const std::vector<StepReport>& steps) {
  // The evaluation's figures (features/evaluation), where the run evaluated.
  const bool evaluated =
      std::any_of(epochs.begin(), epochs.end(), [](const EpochReport& e) { return e.Number("test_loss").has_value(); });
  // A regression target's figures (test_rmse, test_r2) in place of accuracy.
  const bool regression =
      std::any_of(epochs.begin(), epochs.end(), [](const EpochReport& e) { return e.Number("test_rmse").has_value(); });
  Chart loss{"loss", "Loss", regression ? "squared error / variance" : "cross-entropy", {}};
  if (!steps.empty()) {
    Series fine{"train (steps)", {}, false};
    for (const StepReport& s : steps) {
      // x: the epoch's fraction done, so that epoch k's end lands on k.
      fine.points.push_back({s.epoch - 1 + static_cast<double>(s.step) / std::max<uint64_t>(1, s.steps), s.loss});
    }
    loss.series.push_back(fine);
  }
  loss.series.push_back(PerEpoch("train", epochs, [](const EpochReport& e) { return e.train_loss; }));
  if (evaluated) loss.series.push_back(FigurePerEpoch("test", epochs, "test_loss"));
  std::vector<Chart> charts = {loss};
  if (evaluated && regression) {
    charts.push_back({"rmse", "Test RMSE", "target units", {FigurePerEpoch("test", epochs, "test_rmse")}});
  } else if (evaluated) {
    charts.push_back({"accuracy", "Test accuracy", "accuracy", {FigurePerEpoch("test", epochs, "test_accuracy")}});
  }
  charts.push_back({"throughput",
                    "Samples per second (all ranks)",
                    "samples/s",
                    {PerEpoch("samples/s", epochs, [](const EpochReport& e) { return e.samples_per_s; })},
                    true});
  charts.push_back({"time",
                    "Where the epoch went (rank 0)",
                    "% of the epoch",
                    {PerEpoch("compute", epochs, [](const EpochReport& e) { return 100 * e.compute_fraction; }),
                     PerEpoch("sync wait", epochs, [](const EpochReport& e) { return 100 * e.comm_fraction; }),
                     PerEpoch("data stall", epochs, [](const EpochReport& e) { return 100 * e.stall_fraction; })},
                    true});
  charts.push_back({"lr",
                    "Learning rate (last step of each epoch)",
                    "lr",
                    {PerEpoch("lr", epochs, [](const EpochReport& e) { return e.lr; })},
                    true});
  return charts;
}

std::string Row(const std::string& key, const std::string& value) {
  return "<tr><th>" + Escape(key) + "</th><td>" + Escape(value) + "</td></tr>\n";
}

}  // namespace

std::string RenderHtmlReport(const TrainConfig& config, const Layout& layout, const std::vector<EpochReport>& epochs,
                             const std::vector<StepReport>& steps) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>granary train: " +
      Escape(config.data.db) +
      "</title>\n<style>\n"
      "body{font-family:sans-serif;margin:24px;color:#222}figure{display:inline-block;margin:8px}"
      "table{border-collapse:collapse;margin:8px 0}th,td{text-align:left;padding:2px 10px;border-bottom:1px solid #ddd}"
      "th{font-weight:600}.grid{stroke:#e4e4e4}.tick,.legend{font-size:11px;fill:#444}.axis{font-size:12px;fill:#222}"
      ".title{font-size:14px;font-weight:600}pre{background:#f6f6f6;padding:8px;overflow-x:auto}\n"
      "</style>\n</head>\n<body>\n<h1>granary train</h1>\n<table>\n";
  html += Row("db", config.data.db);
  html += Row("model", config.model.name);
  html += Row("layout", layout.Describe());
  html += Row("epochs", std::to_string(epochs.size()) + " of " + std::to_string(config.optim.epochs));
  if (!epochs.empty()) {
    const EpochReport& last = epochs.back();
    const std::optional<double> test_loss = last.Number("test_loss"), test_accuracy = last.Number("test_accuracy");
    const std::optional<double> test_rmse = last.Number("test_rmse"), test_r2 = last.Number("test_r2");
    std::string scored;
    if (test_loss && test_accuracy) {
      scored = ", test accuracy " + Format("%.4f", *test_accuracy);
    } else if (test_loss && test_rmse && test_r2) {
      scored = ", test RMSE " + Format("%.6g", *test_rmse) + ", test R\u00b2 " + Format("%.4f", *test_r2);
    }
    html += Row("last epoch", "train loss " + Format("%.4f", last.train_loss) +
                                  (test_loss ? ", test loss " + Format("%.4f", *test_loss) : "") + scored + ", " +
                                  Format("%.0f", last.samples_per_s) + " samples/s");
  }
  html += "</table>\n";
  std::string notes;  // what the text said after an epoch's line: a prune, the imbalance and past-its-best notes
  for (const EpochReport& r : epochs) {
    for (const std::string& line : r.lines_after) {
      notes += "<li>epoch " + std::to_string(r.epoch) + ": " + Escape(line) + "</li>\n";
    }
  }
  if (!notes.empty()) html += "<h2>Notes</h2>\n<ul class=\"notes\">\n" + notes + "</ul>\n";
  for (const Chart& chart : Charts(epochs, steps)) {
    html += "<figure class=\"chart\" id=\"" + chart.id + "\">\n" + Svg(chart) + "</figure>\n";
  }
  html += "<h2>Configuration</h2>\n<pre>" + Escape(DumpJson(ParseJson(config.ToJson()), 2)) + "</pre>\n";
  html += "<h2>Layout</h2>\n<pre>" + Escape(DumpJson(ParseJson(layout.ToJson()), 2)) + "</pre>\n";
  return html + "</body>\n</html>\n";
}

}  // namespace granary
