// End to end: flags, runs and models that used to mislead, each refused or
// stopped with one line naming the flag, step or file.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

class Refusals : public SmallDbRun {};

// A negative --lr or --weight-decay used to mean "the default", --seed -1
// wrapped to 2^64 - 1, --tune-seconds 0 skipped its bound.
TEST_F(Refusals, FlagsThatUsedToMeanSomethingElse) {
  ExpectOneLineError(RunCommand(train_ + "--lr -1", dir_), "--lr: must be > 0");
  ExpectOneLineError(RunCommand(train_ + "--weight-decay -1", dir_), "--weight-decay: must be >= 0");
  ExpectOneLineError(RunCommand(train_ + "--seed -1", dir_), "--seed: must be >= 0");
  ExpectOneLineError(RunCommand(train_ + "--tune --tune-seconds 0", dir_), "--tune-seconds 0: must be in 0.5..600");
  ExpectOneLineError(RunCommand(train_ + "--master-port 70000", dir_), "--master-port 70000: must be in 0..65535");
  EXPECT_EQ(RunCommand(train_ + "--epochs 1 --weight-decay 1e-4", dir_).exit_code, 0);
  ExpectOneLineError(PrepFashion(dir_.Sub("m.db"), "--max-shard-mb 1", dir_),
                     "--max-shard-mb: must be 0 (no limit) or at least 2");
  ExpectOneLineError(
      PrepFashion(dir_.Sub("d.db"), "--limit 2 --dictionary on --no-progress", dir_),
      "--dictionary on: zstd could not train a dictionary on 2 samples");
  ExpectOneLineError(PrepFashion(dir_.Sub("z.db"), "--limit 20 --dictionary on --zstd-level 0 --no-progress", dir_),
                     "--dictionary on needs compression");
  fs::create_directories(dir_.Sub("junk/a"));
  testing::WriteFile(dir_.Sub("junk/a/1.jpg"), "not a jpeg");
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("junk") + " " + dir_.Sub("j.db") + " --no-progress", dir_),
                     "more than --max-rejects allows; first: a/1.jpg: not a JPEG or PNG image");
}

// A run whose loss becomes NaN stops naming the step instead of exiting 0.
TEST_F(Refusals, ADivergedRunStopsNamingTheStep) {
  auto r = RunCommand(train_ + "--ranks 1 --epochs 2 --optimizer sgd --lr 1e6", dir_);
  ExpectOneLineError(r, "the training loss became nan at step ");
  EXPECT_NE(r.err.find("try a lower --lr (now 1e+06)"), std::string::npos) << r.err;
}

// A resume with another optimizer names the optimizer, not the lr that
// follows from it; --metrics continues the earlier lines.
TEST_F(Refusals, AResumeNamesTheOptimizerAndMetricsAppend) {
  const std::string ck = " --checkpoint-dir " + dir_.Sub("ck") + " --metrics " + dir_.Sub("m.jsonl");
  ASSERT_EQ(RunCommand(train_ + "--ranks 1 --epochs 1 --optimizer adam" + ck, dir_).exit_code, 0);
  ExpectOneLineError(RunCommand(train_ + "--ranks 1 --epochs 2 --optimizer sgd --resume latest" + ck, dir_),
                     "differs in optim.optimizer: \"adam\" -> \"sgd\"");
  ASSERT_EQ(RunCommand(train_ + "--ranks 1 --epochs 2 --optimizer adam --resume latest" + ck, dir_).exit_code, 0);
  EXPECT_EQ(RunCommand("grep -c '\"type\": *\"epoch\"' " + dir_.Sub("m.jsonl"), dir_).out, "2\n");
}

// Nodes started with different --ranks used to time out in Gloo's
// rendezvous (or fail its enforce); now both say what differs.
TEST_F(Refusals, NodesWithDifferentRanksSayWhatDiffers) {
  const std::string node = train_ + "--epochs 1 --threads 1 --pin off --nnodes 2 --timeout 20 " +
                           "--master-addr 127.0.0.1 " +
                           "--master-port " + std::to_string(testing::FreePort()) + " ";
  auto r = RunCommand("(" + node + "--ranks 2 --node-rank 1 2> " + dir_.Sub("node1.err") + " & " + node +
                          "--ranks 1 --node-rank 0; rc=$?; wait; exit $rc)",
                      dir_);
  ExpectOneLineError(r, "counts 4 ranks in all, rank 0 counts 2: start every node with the same --ranks and --nnodes");
  EXPECT_NE(testing::ReadFile(dir_.Sub("node1.err")).find("start every node with the same --ranks"),
            std::string::npos);
}

// A rank stopped before it even started (before main) is named, as a rank
// that hangs later is.
TEST_F(Refusals, ARankStoppedDuringStartUpIsNamed) {
  auto r = RunCommand(std::string("LD_PRELOAD=") + GRANARY_STOP_AT_START_LIB + " GRANARY_TEST_STOP_RANK=1 " + train_ +
                          "--epochs 1 --ranks 2 --timeout 2",
                      dir_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("rank 1 did not start in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(its process is stopped)"), std::string::npos) << r.err;
  // No rank left behind ("[l]": the pattern does not match pgrep's own shell).
  EXPECT_EQ(RunCommand("pgrep -f -- '--ranks 2 --timeout 2 --[l]ayout'", dir_).out, "");
}

// A TorchScript model that loops for ever is stopped after --timeout in its
// dry forward, before any rank starts, and the launcher exits cleanly.
TEST_F(Refusals, ALoopingModelIsStoppedAfterTimeout) {
  const std::string model = dir_.Sub("loop.pt");
  ASSERT_EQ(testing::SaveScriptedNet("class Net(torch.nn.Module):\n"
                                     "    def __init__(self):\n"
                                     "        super().__init__()\n"
                                     "        self.head = torch.nn.Linear(784, 10)\n"
                                     "    def forward(self, x):\n"
                                     "        while bool(x.sum() > -1.0):\n"
                                     "            x = x + 1\n"
                                     "        return self.head(x.flatten(1))\n",
                                     model, dir_),
            "");
  for (const char* ranks : {"1", "2"}) {
    auto r = RunCommand(train_ + "--model " + model + " --timeout 2 --ranks " + ranks, dir_);
    ExpectOneLineError(r, "the forward did not return within --timeout 2 s");
    EXPECT_EQ(r.exit_code, 1) << ranks;  // not a crash on the way out
  }
}

}  // namespace
}  // namespace granary
