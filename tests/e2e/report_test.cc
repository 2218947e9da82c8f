// End to end, what a run shows: --metrics lines, the --report page, the progress line.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// Seeing the run. --metrics writes a JSON line every --log-every
// steps and one per epoch; --report writes one HTML page whose charts a
// headless Chromium (Debian's, installed by tools/setup) renders; a progress
// line is drawn on a terminal (a pty from script(1)) and never otherwise.
TEST_F(EndToEnd, MetricsReportAndProgressLine) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 640 --no-progress", dir_).exit_code, 0);
  const std::string args = "--db " + db + " --ranks 2 --epochs 2 --batch-size 64 --log-every 4 --metrics " +
                           dir_.Sub("run.jsonl") + " --report " + dir_.Sub("run.html");
  auto r = RunCommand(kTrain + " " + args, dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("\033[K"), std::string::npos) << "a progress line when stderr is not a terminal";

  std::string metrics;
  ASSERT_TRUE(ReadFile(dir_.Sub("run.jsonl"), &metrics).ok());
  int steps = 0, epochs = 0;
  for (size_t at = 0; at < metrics.size();) {
    const size_t nl = metrics.find('\n', at);
    ASSERT_NE(nl, std::string::npos);
    const auto line = nlohmann::json::parse(metrics.substr(at, nl - at));
    if (line["type"] == "step") {
      ++steps;
      EXPECT_EQ(line["global_step"].get<int>() % 4, 0) << line;
      EXPECT_GT(line["loss"].get<double>(), 0) << line;
    } else {
      ++epochs;
      EXPECT_EQ(line["type"], "epoch");
      EXPECT_TRUE(line.contains("test_accuracy")) << line;
    }
    at = nl + 1;
  }
  EXPECT_EQ(steps, 2 * 10 / 4);  // 640 samples / 64 = 10 steps an epoch: steps 4, 8, 12, 16, 20
  EXPECT_EQ(epochs, 2);

  auto dom = RunCommand("timeout 120 chromium --headless --no-sandbox --disable-gpu --dump-dom file://" +
                            dir_.Sub("run.html"),
                        dir_);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  for (const char* id : {"loss", "accuracy", "throughput", "time", "lr"}) {
    const size_t figure = dom.out.find("id=\"" + std::string(id) + "\"");
    ASSERT_NE(figure, std::string::npos) << id;
    const size_t svg = dom.out.find("<svg", figure), polyline = dom.out.find("<polyline", figure);
    EXPECT_LT(svg, dom.out.find("</figure>", figure)) << id;
    EXPECT_LT(polyline, dom.out.find("</svg>", figure)) << id;
  }

  auto tty = RunCommand("script -qec '" + kTrain + " " + args + "' /dev/null", dir_);
  ASSERT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_NE(tty.out.find("\033[Kepoch 2/2  step 10/10"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("ETA"), std::string::npos) << tty.out;
}

}  // namespace
}  // namespace granary
