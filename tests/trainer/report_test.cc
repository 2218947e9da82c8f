#include <gtest/gtest.h>

#include "trainer/report/epoch_json.h"
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
    if (evaluated) {  // the evaluation's figures (features/evaluation)
      r.Set("test_loss", 1.2 / e);
      r.Set("test_accuracy", 0.5 + 0.1 * e);
    }
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
  std::vector<EpochReport> epochs = Epochs(3, true);
  epochs[2].lines_after = {"train: test_loss was lowest after epoch 1 <b>"};
  const std::string html = RenderHtmlReport(config, layout, epochs, steps);
  EXPECT_NE(html.find("<ul class=\"notes\">\n<li>epoch 3: train: test_loss was lowest after epoch 1 &lt;b&gt;</li>"),
            std::string::npos) << html;
  EXPECT_EQ(RenderHtmlReport(config, layout, Epochs(3, true), steps).find("notes"), std::string::npos);
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

// What --json writes of an epoch is what --tune reads back: every one of the
// loop's members and every figure the hooks added (numbers and strings, by
// name); a missing or mistyped member of the loop's is named, never read as
// 0, and a figure that is neither number nor string is refused.
TEST(EpochJson, RoundTripsEveryFieldAndNamesWhatIsMissing) {
  EpochReport r = Epochs(2, /*evaluated=*/true)[1];
  r.seconds = 12.5;
  r.queue_depth = 3.25;
  r.peak_rss_mb = 812;
  r.parameters = 1000;
  r.parameters_after = 600;
  r.Set("pruned", std::string("conv1 32->16"));
  r.Set("weights_hash", std::string("xxh64:0123456789abcdef"));
  r.Set("test_samples", uint64_t{10000});
  r.Set("seconds_to_target", 41.5);
  r.lines_after = {"train: test_acc peaked at 0.9000 after epoch 1 ..."};
  StatusOr<EpochReport> back = EpochFromJson(EpochToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(EpochToJson(back.value()), EpochToJson(r));
  EXPECT_EQ(back->comm_fraction, 0.05);
  EXPECT_EQ(back->parameters_after, 600u);
  EXPECT_EQ(back->Number("test_samples"), 10000.0);
  EXPECT_EQ(std::get<uint64_t>(back->Find("test_samples")->value), 10000u);
  EXPECT_EQ(back->Number("test_accuracy"), 0.7);
  EXPECT_EQ(back->Number("seconds_to_target"), 41.5);
  EXPECT_EQ(std::get<std::string>(back->Find("pruned")->value), "conv1 32->16");
  EXPECT_FALSE(back->Number("pruned").has_value());  // a string figure is no number
  EXPECT_EQ(back->lines_after, r.lines_after);        // the notes after its line, for a script as for a reader
  r.Set("test_accuracy", 0.75);                        // set again: replaced, not added
  EXPECT_EQ(r.figures.size(), 6u);
  EXPECT_EQ(r.Number("test_accuracy"), 0.75);

  EpochReport plain = Epochs(1, /*evaluated=*/false)[0];
  StatusOr<EpochReport> unevaluated = EpochFromJson(EpochToJson(plain));
  ASSERT_TRUE(unevaluated.ok()) << unevaluated.status().message();
  EXPECT_TRUE(unevaluated->figures.empty());

  nlohmann::json missing = EpochToJson(r);
  missing.erase("comm_fraction");
  StatusOr<EpochReport> bad = EpochFromJson(missing);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'comm_fraction'"), std::string::npos) << bad.status().message();
  nlohmann::json mistyped = EpochToJson(r);
  mistyped["samples_per_s"] = "fast";
  bad = EpochFromJson(mistyped);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'samples_per_s' is string"), std::string::npos) << bad.status().message();
  nlohmann::json odd = EpochToJson(back.value());
  odd["test_loss"] = nlohmann::json::array({1, 2});
  bad = EpochFromJson(odd);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'test_loss' is array"), std::string::npos) << bad.status().message();
  odd = EpochToJson(back.value());
  odd["notes"] = nlohmann::json::array({"a line", 2});
  bad = EpochFromJson(odd);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'notes' is not an array of strings"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace granary
