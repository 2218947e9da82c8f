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
  for (const char* c : {"a", "b"}) {  // two classes: one would add a note before the error
    fs::create_directories(dir_.Sub("junk/" + std::string(c)));
    testing::WriteFile(dir_.Sub("junk/" + std::string(c) + "/1.jpg"), "not a jpeg");
  }
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("junk") + " " + dir_.Sub("j.db") + " --no-progress", dir_),
                     "more than --max-rejects 0.01 allows; first: a/1.jpg: not a JPEG, PNG or WebP image");
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

// A node started alone used to end with torch's "Socket Timeout" or "The
// client socket has timed out ..."; now the line says which side was missing
// and what to start.
TEST_F(Refusals, ANodeStartedAloneSaysWhatToStart) {
  const std::string nodes = train_ + "--epochs 1 --threads 1 --pin off --nnodes 2 --master-addr 127.0.0.1 " +
                            "--master-port " + std::to_string(testing::FreePort()) + " ";
  const std::string node = nodes + "--timeout 3 ";
  auto second = RunCommand(node + "--ranks 1 --node-rank 1", dir_);
  ExpectOneLineError(second, "node 0's rendezvous at 127.0.0.1:");
  EXPECT_NE(second.err.find("did not answer within --timeout 3 s: start node 0 (--node-rank 0) too"),
            std::string::npos) << second.err;
  // Node 0 alone: whichever notices first (rank 0's store, or the launcher
  // watching it wait) names the nodes to start.
  auto first = RunCommand(node + "--ranks 1 --node-rank 0", dir_);
  EXPECT_EQ(first.exit_code, 1);
  EXPECT_NE(first.err.find("start all 2 nodes"), std::string::npos) << first.err;
  // Rank 0 stopped before it serves the store: its peer on the same machine
  // is not told to start node 0. (--timeout 1: rank 1 gives up long before
  // the launcher's 10 s for a rank that never started, on a loaded machine too.)
  auto stopped = RunCommand(std::string("LD_PRELOAD=") + GRANARY_STOP_AT_START_LIB + " GRANARY_TEST_STOP_RANK=0 " +
                                nodes + "--ranks 2 --node-rank 0 --timeout 1",
                            dir_);
  EXPECT_NE(stopped.exit_code, 0);
  EXPECT_NE(stopped.err.find("rank 1: rank 0's rendezvous store at 127.0.0.1:"), std::string::npos) << stopped.err;
  EXPECT_NE(stopped.err.find(", on this machine, did not answer within --timeout 1 s (rank 0 slow to start, or gone)"),
            std::string::npos)
      << stopped.err;
}

// A dataset or db repository cloned without git-lfs holds a pointer in
// place of each large file: every tool names it, with what to run, instead
// of "not an IDX file (bad magic)", a CSV of one column 'version
// https://...', or "129 bytes, manifest says 929792".
TEST_F(Refusals, GitLfsPointersAreNamedWithWhatToRun) {
  const std::string pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:" + std::string(64, '0') +
                              "\nsize 929792\n";
  const std::string advice = "is a Git LFS pointer, not the file itself (the repository was cloned without "
                             "git-lfs): fetch the files with git lfs pull in the repository";
  fs::create_directories(dir_.Sub("idx"));
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"}) {
    testing::WriteFile(dir_.Sub(std::string("idx/") + name), pointer);
  }
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("idx") + " " + dir_.Sub("a.db"), dir_),
                     "train-images-idx3-ubyte: " + advice);
  testing::WriteFile(dir_.Sub("train.csv"), pointer);
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("train.csv") + " " + dir_.Sub("b.db"), dir_),
                     "train.csv: " + advice);
  const std::string lfs_db = dir_.Sub("lfs.db");
  fs::copy(db_, lfs_db, fs::copy_options::recursive);
  testing::WriteFile(lfs_db + "/train/shard-00000.mdb", pointer);
  for (const std::string& tool : {kPrep + " info ", train_.substr(0, train_.find("--db")) + "--db "}) {
    ExpectOneLineError(RunCommand(tool + lfs_db, dir_), "train/shard-00000.mdb: " + advice);
  }
  testing::WriteFile(lfs_db + "/manifest.json", pointer);
  ExpectOneLineError(RunCommand(kPrep + " info " + lfs_db, dir_), "manifest.json: " + advice);
}

// A rank stopped before it even started (before main) is named, as a rank
// that hangs later is.
TEST_F(Refusals, ARankStoppedDuringStartUpIsNamed) {
  auto r = RunCommand(std::string("LD_PRELOAD=") + GRANARY_STOP_AT_START_LIB + " GRANARY_TEST_STOP_RANK=1 " + train_ +
                          "--epochs 1 --ranks 2 --timeout 10",  // rank 0 starts within it on a loaded machine too
                      dir_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("rank 1 did not start in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(its process is stopped)"), std::string::npos) << r.err;
  // Rank 0's own line, where it times out before the launcher stops it.
  if (r.err.find("rank 0:") != std::string::npos) {
    EXPECT_NE(r.err.find("rank 0: not every one of the 2 ranks joined the rendezvous within --timeout 10 s"),
              std::string::npos) << r.err;
  }
  // No rank left behind ("[l]": the pattern does not match pgrep's own shell).
  EXPECT_EQ(RunCommand("pgrep -f -- '--ranks 2 --timeout 10 --[l]ayout'", dir_).out, "");
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

// Round 3: --eval-only refuses the flags it does not use (it ignored --save,
// --resume of a file that does not exist, --quantize ...) and checks only
// what it uses: --threads up to the cores is one process's, not 2 ranks'.
TEST_F(Refusals, EvalOnlyRefusesWhatItDoesNotUse) {
  const std::string model = dir_.Sub("m.pt");
  ASSERT_EQ(RunCommand(train_ + "--epochs 1 --ranks 1 --save " + model, dir_).exit_code, 0);
  const std::string eval = train_ + "--eval-only --model " + model + " ";
  ExpectOneLineError(RunCommand(eval + "--save x.pt --resume nope --synthetic", dir_),
                     "--eval-only does not use --batch-size, --resume, --save, --synthetic");
  EXPECT_FALSE(fs::exists(dir_.Sub("x.pt")));
  auto threads = RunCommand(kTrain + " --db " + db_ + " --eval-only --model " + model + " --threads $(nproc)", dir_);
  EXPECT_EQ(threads.exit_code, 0) << threads.err;
  ExpectOneLineError(RunCommand(kTrain + " --db " + db_ + " --eval-only --model " + model + " --eval-split nope", dir_),
                     "--eval-split nope: " + db_ + " has no such split (it has train, test)");
}

// Models that cannot train are refused before any rank starts, saying what
// they are: a directory or a device ("no such file" before), half or integer
// logits (each rank failed in log_softmax), an INT8 model (each rank failed
// in backward); a model that breaks in evaluation is named.
TEST_F(Refusals, ModelsThatCannotTrainAreNamedBeforeAnyRankStarts) {
  fs::create_directories(dir_.Sub("d.pt"));
  fs::create_symlink("/dev/zero", dir_.Sub("z.pt"));
  ExpectOneLineError(RunCommand(train_ + "--model " + dir_.Sub("d.pt"), dir_),
                     "d.pt: is a directory, not a TorchScript file");
  ExpectOneLineError(RunCommand(kTrain + " --db " + db_ + " --eval-only --model " + dir_.Sub("z.pt"), dir_),
                     "z.pt: is a character device, not a TorchScript file");
  const std::string net =
      "class Net(torch.nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.head = torch.nn.Linear(784, 10)\n"
      "    def forward(self, x):\n";
  ASSERT_EQ(
      testing::SaveScriptedNet(net + "        return self.head(x.flatten(1)).half()\n", dir_.Sub("half.pt"), dir_), "");
  ExpectOneLineError(RunCommand(train_ + "--model " + dir_.Sub("half.pt"), dir_),
                     "gives Half logits: the loss needs float32");
  ASSERT_EQ(testing::SaveScriptedNet(net + "        y = self.head(x.flatten(1))\n"
                                           "        return y[:, :5] if x.size(0) > 100 else y\n",
                                     dir_.Sub("big.pt"), dir_),
            "");
  ExpectOneLineError(RunCommand(train_ + "--ranks 1 --epochs 1 --model " + dir_.Sub("big.pt"), dir_),
                     "model " + dir_.Sub("big.pt") + ": split 'test', a batch of 256: evaluation:");
  const std::string model = dir_.Sub("q.pt");
  ASSERT_EQ(RunCommand(train_ + "--epochs 1 --ranks 1 --quantize int8 --calibration-batches 2 --save " + model, dir_)
                .exit_code,
            0);
  ExpectOneLineError(RunCommand(train_ + "--ranks 2 --model " + dir_.Sub("q.int8.pt"), dir_),
                     "q.int8.pt: has no trainable parameters (a model saved for inference only? run it with --eval-only)");
  EXPECT_EQ(RunCommand("pgrep -f -- 'q.int8.pt --[l]ayout'", dir_).out, "");  // no rank was started
  // --quantize with random batches wrote nothing and said nothing; a flag for a feature that is off.
  ExpectOneLineError(RunCommand(train_ + "--quantize int8 --synthetic --save " + dir_.Sub("s.pt"), dir_),
                     "--quantize int8 calibrates on training batches: not with --synthetic");
  ExpectOneLineError(RunCommand(train_ + "--powersgd-rank 8", dir_),
                     "--powersgd-rank 8: only used with --sync-compress powersgd");
}

// Round 3: a model trained with --mean/--std used to be evaluated without
// them (0.4863 instead of 0.6553, exit 0): the saved file records them
// (granary.json) and --eval-only and `train --model` apply them; a different
// --mean/--std is refused. Features are given raw: --mean/--std on a
// feature db used to apply (loss 60177) although the README said not.
TEST_F(Refusals, ASavedModelCarriesItsInputNormalisation) {
  const std::string model = dir_.Sub("ms.pt");
  const auto trained = TrainJson("--db " + db_ + " --epochs 1 --ranks 1 --mean 0.5 --std 0.25 --save " + model, dir_);
  const std::string eval = kTrain + " --db " + db_ + " --eval-only --model " + model;
  const auto evaluated = TrainJson("--db " + db_ + " --eval-only --model " + model, dir_);
  EXPECT_DOUBLE_EQ(evaluated["accuracy"].get<double>(), trained["epochs"][0]["test_accuracy"].get<double>());
  EXPECT_EQ(RunCommand(eval + " --mean 0.5 --std 0.25", dir_).exit_code, 0);
  ExpectOneLineError(RunCommand(eval + " --mean 0.3", dir_),
                     "--mean 0.3 --std 1: --model " + model + " was trained with --mean 0.5 --std 0.25");
  const auto tuned = TrainJson("--db " + db_ + " --epochs 1 --ranks 1 --model " + model, dir_);  // it trains on
  EXPECT_EQ(tuned["config"]["data"]["mean"], 0.5);
  testing::WriteFile(dir_.Sub("t.csv"), "a,b,y\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n");
  ASSERT_EQ(
      RunCommand(kPrep + " build " + dir_.Sub("t.csv") + " " + dir_.Sub("c.db") + " --label y --no-progress", dir_)
          .exit_code,
      0);
  ExpectOneLineError(RunCommand(kTrain + " --db " + dir_.Sub("c.db") + " --batch-size 2 --mean 100 --std 0.001", dir_),
                     "--mean/--std: field 'features' of " + dir_.Sub("c.db") + " is a feature vector [2]");
}

}  // namespace
}  // namespace granary
