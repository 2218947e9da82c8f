#include <gtest/gtest.h>

#include "trainer/report/html_report.h"

namespace granary {
namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::vector<EpochReport> Epochs(int n, bool evaluated) {
  std::vector<EpochReport> out;
  for (int e = 1; e <= n; ++e) {
    EpochReport r;
    r.epoch = e;
    r.train_loss = 1.0 / e;
    r.samples_per_s = 1000 + e;
    r.compute_fraction = 0.9;
    r.comm_fraction = 0.05;
    r.stall_fraction = 0.01;
    r.lr = 0.1 / e;
    r.evaluated = evaluated;
    r.test_loss = 1.2 / e;
    r.test_accuracy = 0.5 + 0.1 * e;
    out.push_back(r);
  }
  return out;
}

// One chart per figure, a point per epoch in each per-epoch series, the
// step curve under the loss, and nothing from the run's strings unescaped.
TEST(HtmlReport, HasEveryChartWithAPointPerEpochAndEscapesNames) {
  TrainConfig config;
  config.data.db = "/data/<b>&\"db\"";
  Layout layout;
  std::vector<StepReport> steps(4);
  for (int i = 0; i < 4; ++i) steps[i] = {1 + i / 2, static_cast<uint64_t>(i % 2 + 1), 2, i + 1, 1.0, 1.0, 0.1, 10, 1};
  const std::string html = RenderHtmlReport(config, layout, Epochs(3, true), steps);
  for (const char* id : {"loss", "accuracy", "throughput", "time", "lr"}) {
    EXPECT_NE(html.find("<figure class=\"chart\" id=\"" + std::string(id) + "\">\n<svg"), std::string::npos) << id;
  }
  EXPECT_EQ(Count(html, "<svg"), 5u);
  // loss: steps, train, test; accuracy; throughput; time: 3; lr.
  EXPECT_EQ(Count(html, "<polyline"), 9u);
  EXPECT_EQ(Count(html, "<circle"), 8u * 3);  // every per-epoch series marks its 3 epochs
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("/data/&lt;b&gt;&amp;&quot;db&quot;"), std::string::npos);
  EXPECT_EQ(Count(html, "http"), Count(html, "http://www.w3.org/2000/svg"));  // only SVG's namespace
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);  // nothing fetched
}

TEST(HtmlReport, WithoutEvaluationThereIsNoAccuracyChart) {
  const std::string html = RenderHtmlReport(TrainConfig{}, Layout{}, Epochs(2, false), {});
  EXPECT_EQ(html.find("id=\"accuracy\""), std::string::npos);
  EXPECT_EQ(Count(html, "<svg"), 4u);
  EXPECT_EQ(html.find("data-series=\"test\""), std::string::npos);
}

}  // namespace
}  // namespace granary
