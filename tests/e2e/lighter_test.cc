// Lighter models end to end: train --quantize int8 writes FILE.int8.pt
// beside --save FILE.pt and reports both models on the eval split; Python
// loads the INT8 file and gets train's accuracy; --eval-only measures any
// saved model; --prune shrinks the model and resumes exactly; what cannot be
// done is refused before any rank starts.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// Accuracy of the TorchScript model at argv[2] on argv[1]'s test split, read
// with tools/granary_db.py, in batches of 256 as train evaluates.
const char kPythonAccuracy[] =
    "import sys, torch\n"
    "sys.path.insert(0, '" GRANARY_SOURCE_DIR "/tools')\n"
    "import granary_db\n"
    "torch.backends.quantized.engine = 'onednn'\n"
    "split = granary_db.Db(sys.argv[1])['test']\n"
    "m = torch.jit.load(sys.argv[2])\n"
    "xs = torch.stack([torch.tensor(split[i]['image'], dtype=torch.float32).reshape(1, 28, 28) / 255\n"
    "                  for i in range(len(split))])\n"
    "ys = torch.tensor([int(split[i]['label']) for i in range(len(split))])\n"
    "right = 0\n"
    "with torch.no_grad():\n"
    "    for at in range(0, len(split), 256):\n"
    "        right += int((m(xs[at:at + 256]).argmax(1) == ys[at:at + 256]).sum())\n"
    "print(right / len(split))\n";

TEST_F(EndToEnd, Int8ModelIsWrittenMeasuredAndGivesTrainsAccuracyInPython) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 2000 --no-progress", dir_).exit_code, 0);
  const std::string save = dir_.Sub("m.pt"), int8 = dir_.Sub("m.int8.pt");
  auto j = TrainJson("--db " + db + " --model convnet --width 0.5 --epochs 2 --batch-size 64 --quantize int8 " +
                         "--calibration-batches 8 --save " + save,
                     dir_);
  ASSERT_TRUE(j.contains("quantized")) << j.dump();
  const nlohmann::json& q = j["quantized"];
  for (const char* key : {"fp32_accuracy", "int8_accuracy", "fp32_samples_per_s", "int8_samples_per_s", "fp32_bytes",
                          "int8_bytes", "threads"}) {
    EXPECT_TRUE(q.contains(key)) << key;
  }
  EXPECT_EQ(q["int8_layers"], 4);  // conv1, conv2, fc1, fc2
  EXPECT_TRUE(q["fp32_layers"].empty()) << q["fp32_layers"];
  EXPECT_EQ(q["calibration_samples"], 8 * 32);  // 8 batches of a rank's 32
  EXPECT_EQ(q["path"], int8);
  EXPECT_EQ(q["threads"], 1);  // 2 ranks on 2 cores
  // The trained model as saved is the fp32 side: the last epoch's accuracy.
  EXPECT_NEAR(q["fp32_accuracy"].get<double>(), j["epochs"][1]["test_accuracy"].get<double>(), 2e-3);
  EXPECT_NEAR(q["int8_accuracy"].get<double>(), q["fp32_accuracy"].get<double>(), 0.03);
  EXPECT_GT(q["int8_accuracy"].get<double>(), 0.5);  // chance is 0.1
  EXPECT_EQ(q["fp32_bytes"].get<uint64_t>(), fs::file_size(save));
  EXPECT_EQ(q["int8_bytes"].get<uint64_t>(), fs::file_size(int8));
  EXPECT_LT(q["int8_bytes"].get<double>(), 0.35 * q["fp32_bytes"].get<double>());
  EXPECT_GT(q["int8_samples_per_s"].get<double>(), 0);

  // Python's torch.jit.load runs the INT8 file with train's accuracy (one
  // sample of slack: the same kernels, another process).
  testing::WriteFile(dir_.Sub("accuracy.py"), kPythonAccuracy);
  auto python = RunCommand("/usr/bin/python3 " + dir_.Sub("accuracy.py") + " " + db + " " + int8, dir_);
  ASSERT_EQ(python.exit_code, 0) << python.err;
  const double samples = 2000;
  EXPECT_NEAR(std::stod(python.out), q["int8_accuracy"].get<double>(), 1.5 / samples) << python.out;

  // --eval-only measures either file the same way.
  for (const auto& [path, key] : {std::pair{save, "fp32_accuracy"}, std::pair{int8, "int8_accuracy"}}) {
    auto e = TrainJson("--db " + db + " --model " + path + " --eval-only --threads 1", dir_);
    EXPECT_EQ(e["samples"], 2000);
    EXPECT_NEAR(e["accuracy"].get<double>(), q[key].get<double>(), 1e-9) << path;
    EXPECT_EQ(e["int8_layers"], path == int8 ? 4 : 0);
    EXPECT_GT(e["samples_per_s"].get<double>(), 0);
    EXPECT_EQ(e["threads"], 1);
  }
  auto text = RunCommand(kTrain + " --db " + db + " --model " + int8 + " --eval-only", dir_);
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("2000 samples  acc "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(int8, "), std::string::npos) << text.out;
}

// --prune shrinks the model at the ends of epochs 1 and 2; a run resumed from
// a checkpoint before the first prune, or between the two, ends with the
// uninterrupted run's losses and weights exactly; the saved pruned model
// evaluates as the last epoch did.
TEST_F(EndToEnd, PruningShrinksTheModelAndResumesExactlyAcrossAPrune) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 3000 --no-progress", dir_).exit_code, 0);
  // 3,000 samples / batch 64: 47 steps an epoch; checkpoints every 10 steps, all kept.
  const std::string args = "--db " + db + " --model convnet --width 0.5 --epochs 3 --optimizer adam " +
                           "--prune 0.5 --prune-epochs 1-2 --checkpoint-every 10 --keep 100 --ranks 2";
  auto whole = TrainJson(args + " --checkpoint-dir " + dir_.Sub("whole") + " --save " + dir_.Sub("pruned.pt"), dir_);
  ASSERT_EQ(whole["epochs"].size(), 3u);
  const auto parameters = [&](int i) { return whole["epochs"][i]["parameters"].get<double>(); };
  EXPECT_LT(parameters(1), 0.8 * parameters(0));  // 3/4 of the channels after epoch 1 (multiples of 16)
  EXPECT_LT(parameters(2), 0.4 * parameters(0));  // half of them after epoch 2: about a quarter of the weights
  EXPECT_EQ(parameters(2), whole["epochs"][2]["parameters"].get<double>());
  EXPECT_GT(whole["epochs"][2]["test_accuracy"].get<double>(), 0.6);

  for (const char* step : {"0000000040", "0000000050"}) {  // epoch 1 before its prune; epoch 2, after it
    SCOPED_TRACE(step);
    const std::string from = dir_.Sub("whole/step-") + step + ".ckpt";
    ASSERT_TRUE(fs::exists(from));
    auto resumed = TrainJson(args + " --checkpoint-dir " + dir_.Sub(std::string("from-") + step) + " --resume " + from,
                             dir_);
    ASSERT_EQ(resumed["epochs"].size(), 3u - std::stoi(step) / 47);
    for (size_t i = 0; i < resumed["epochs"].size(); ++i) {
      const auto& a = whole["epochs"][3 - resumed["epochs"].size() + i];
      const auto& b = resumed["epochs"][i];
      EXPECT_EQ(a["train_loss"], b["train_loss"]) << "epoch " << a["epoch"];
      EXPECT_EQ(a["parameters"], b["parameters"]) << "epoch " << a["epoch"];
      EXPECT_EQ(a["weights_hash"], b["weights_hash"]) << "epoch " << a["epoch"];
    }
  }
  auto e = TrainJson("--db " + db + " --model " + dir_.Sub("pruned.pt") + " --eval-only", dir_);
  EXPECT_NEAR(e["accuracy"].get<double>(), whole["epochs"][2]["test_accuracy"].get<double>(), 2e-3);
}

// A prune after the last epoch: the run's last test_acc, its INT8 line's
// fp32 figure and --eval-only of the saved file are all the pruned model's,
// and the run says the model had no epoch to recover in.
TEST_F(EndToEnd, AfterAPruneInTheLastEpochEveryFigureIsTheSavedModels) {
  const std::string db = dir_.Sub("db");
  ASSERT_EQ(PrepFashion(db, "--limit 1500 --no-progress", dir_).exit_code, 0);
  const std::string save = dir_.Sub("p.pt");
  auto r = RunCommand(kTrain + " --db " + db + " --model convnet --width 0.5 --epochs 2 --ranks 1 --prune 0.9 " +
                          "--prune-epochs 2-2 --quantize int8 --calibration-batches 4 --save " + save + " --json",
                      dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("the saved model has no epoch to recover its accuracy in"), std::string::npos) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& last = j["epochs"][1];
  EXPECT_FALSE(j["epochs"][0].contains("pruned"));
  ASSERT_TRUE(last.contains("pruned")) << last;
  EXPECT_NE(last["pruned"].get<std::string>().find("->"), std::string::npos) << last;
  EXPECT_LT(last["parameters_after"].get<double>(), 0.5 * last["parameters"].get<double>());
  const double accuracy = last["test_accuracy"];
  EXPECT_NEAR(j["quantized"]["fp32_accuracy"].get<double>(), accuracy, 2e-3);
  auto e = TrainJson("--db " + db + " --model " + save + " --eval-only", dir_);
  EXPECT_NEAR(e["accuracy"].get<double>(), accuracy, 2e-3);
}

// A TorchScript model: its linear layer is quantized, its matmul stays fp32,
// named before the ranks start and in the report.
TEST_F(SmallDbRun, AUserModelIsQuantizedWhereThePassesCanAndTheRestIsNamed) {
  const std::string net = dir_.Sub("net.pt");
  ASSERT_EQ(testing::SaveScriptedNet("class Net(torch.nn.Module):\n"
                                     "    def __init__(self):\n"
                                     "        super().__init__()\n"
                                     "        self.fc = torch.nn.Linear(784, 32)\n"
                                     "        self.mix = torch.nn.Parameter(torch.randn(32, 10) * 0.1)\n"
                                     "    def forward(self, x):\n"
                                     "        x = torch.relu(self.fc(torch.flatten(x, 1)))\n"
                                     "        return torch.matmul(x, self.mix)\n",
                                     net, dir_),
            "");
  auto r = RunCommand(train_ + "--model " + net + " --epochs 1 --quantize int8 --save " + dir_.Sub("q.pt") + " --json",
                      dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("train: --quantize int8: will stay fp32: mix (aten::matmul"), std::string::npos) << r.err;
  const auto q = nlohmann::json::parse(r.out)["quantized"];
  EXPECT_EQ(q["int8_layers"], 1);
  ASSERT_EQ(q["fp32_layers"].size(), 1u);
  EXPECT_NE(q["fp32_layers"][0].get<std::string>().find("no INT8 pattern for aten::matmul"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_.Sub("q.int8.pt")));
}

TEST_F(SmallDbRun, WhatCannotBeQuantizedPrunedOrEvaluatedIsRefusedBeforeAnyRankStarts) {
  const std::string save = " --save " + dir_.Sub("out.pt");
  ExpectOneLineError(RunCommand(train_ + "--quantize int4" + save, dir_), "--quantize int4: expected none or int8");
  ExpectOneLineError(RunCommand(train_ + "--quantize int8 --calibration-batches 0" + save, dir_),
                     "--calibration-batches 0: must be in 1..100000");
  ExpectOneLineError(RunCommand(train_ + "--quantize int8 --eval-split ''" + save, dir_),
                     "--quantize int8: the INT8 model is measured against the trained one on the eval split");
  // A model with no conv or linear layer: nothing for the passes to quantize.
  const std::string matmul = dir_.Sub("matmul.pt");
  ASSERT_EQ(testing::SaveScriptedNet("class Net(torch.nn.Module):\n"
                                     "    def __init__(self):\n"
                                     "        super().__init__()\n"
                                     "        self.w = torch.nn.Parameter(torch.zeros(784, 10))\n"
                                     "    def forward(self, x):\n"
                                     "        return torch.matmul(torch.flatten(x, 1), self.w)\n",
                                     matmul, dir_),
            "");
  ExpectOneLineError(RunCommand(train_ + "--model " + matmul + " --quantize int8" + save, dir_),
                     "--quantize int8: model " + matmul +
                         " has no layer LibTorch's graph-mode passes quantize (conv and linear); w (aten::matmul");
  // The INT8 file may not replace what is not a model.
  testing::WriteFile(dir_.Sub("out.int8.pt"), "notes, not a model");
  ExpectOneLineError(RunCommand(train_ + "--quantize int8" + save, dir_), "--quantize int8 " + dir_.Sub("out.int8.pt"));
  EXPECT_EQ(testing::ReadFile(dir_.Sub("out.int8.pt")), "notes, not a model");
  EXPECT_FALSE(fs::exists(dir_.Sub("out.pt")));

  // --eval-only: a saved model only, one that fits the db.
  const std::string eval = kTrain + " --db " + db_ + " --eval-only ";
  ExpectOneLineError(RunCommand(eval, dir_), "--eval-only evaluates a saved model: give --model");
  const std::string five = dir_.Sub("five.pt");
  ASSERT_EQ(testing::SaveScriptedNet("class Net(torch.nn.Module):\n"
                                     "    def __init__(self):\n"
                                     "        super().__init__()\n"
                                     "        self.fc = torch.nn.Linear(784, 5)\n"
                                     "    def forward(self, x):\n"
                                     "        return self.fc(torch.flatten(x, 1))\n",
                                     five, dir_),
            "");
  ExpectOneLineError(RunCommand(eval + "--model " + five, dir_),
                     "gives [2, 5], training needs [2, 10] (10 classes)");
  ExpectOneLineError(RunCommand(eval + "--model " + matmul + " --eval-split ''", dir_),
                     "has no test or val split to evaluate on");

  // --prune: a fraction in (0, 1), epochs within the run, a built-in model.
  ExpectOneLineError(RunCommand(train_ + "--prune 1" + save, dir_), "--prune 1: the fraction of channels removed");
  ExpectOneLineError(RunCommand(train_ + "--prune -0.5" + save, dir_), "--prune -0.5: ");
  ExpectOneLineError(RunCommand(train_ + "--epochs 4 --prune 0.5 --prune-epochs 3-5" + save, dir_),
                     "--prune-epochs 3-5: must be A-B with 1 <= A <= B <= --epochs 4");
  ExpectOneLineError(RunCommand(train_ + "--epochs 4 --prune 0.5 --prune-epochs two" + save, dir_),
                     "--prune-epochs two: must be A-B");
  ExpectOneLineError(RunCommand(train_ + "--prune-epochs 1-2" + save, dir_), "--prune-epochs needs --prune");
  ExpectOneLineError(RunCommand(train_ + "--model " + five + " --prune 0.5" + save, dir_),
                     "--prune: --model " + five + " cannot be pruned");
  EXPECT_FALSE(fs::exists(dir_.Sub("out.pt")));
  // A fraction too small for any layer prunes nothing: said, not silent.
  auto tiny = RunCommand(train_ + "--epochs 1 --ranks 1 --prune 1e-300", dir_);
  EXPECT_EQ(tiny.exit_code, 0) << tiny.err;
  EXPECT_NE(tiny.err.find("--prune 1e-300 removes no channel: every layer of convnet keeps all its channels"),
            std::string::npos)
      << tiny.err;
}

}  // namespace
}  // namespace granary
