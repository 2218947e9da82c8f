// A db's classes as a user first sees them: counted per split as prep
// builds it, and what would mislead a score noted where it is built and
// where it is evaluated (a training split far from balanced; a class that
// the val split lacks, so that its scores say nothing of it).
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

TEST_F(EndToEnd, ClassesAreCountedPerSplitAndWhatMisleadsAScoreIsNoted) {
  ASSERT_EQ(PrepFashion(dir_.Sub("one.db"), "--limit 1 --no-progress", dir_).exit_code, 0);
  ASSERT_EQ(RunCommand(kPrep + " cat " + dir_.Sub("one.db") + " 0 --png " + dir_.Sub("1.png"), dir_).exit_code, 0);
  // train/ and val/ as people keep them; val has no 'bee'.
  const std::map<std::string, std::pair<int, int>> images = {{"ant", {30, 4}}, {"bee", {2, 0}}, {"cow", {3, 1}}};
  for (const auto& [c, n] : images) {
    for (const auto& [split, count] : {std::pair("train", n.first), std::pair("val", n.second)}) {
      fs::create_directories(dir_.Sub("raw/" + std::string(split) + "/" + c));
      for (int i = 0; i < count; ++i) {
        fs::copy_file(dir_.Sub("1.png"), dir_.Sub("raw/" + std::string(split) + "/" + c + "/" + std::to_string(i) +
                                                  ".png"));
      }
    }
  }
  fs::remove(dir_.Sub("raw/val/bee"));
  const std::string db = dir_.Sub("db");
  auto built = RunCommand(kPrep + " build " + dir_.Sub("raw") + " " + db + " --size 16 --no-progress", dir_);
  ASSERT_EQ(built.exit_code, 0) << built.err;
  EXPECT_NE(built.err.find("prep: note: split 'train' is imbalanced: class 'ant' has 30 samples, 'bee' 2 (15x): a "
                           "model that always answers 'ant' scores 85.7% accuracy on it; train reports the balanced "
                           "accuracy beside it, and --class-weights balanced weighs the loss by the classes' rarity\n"),
            std::string::npos) << built.err;
  EXPECT_NE(built.err.find("prep: note: split 'val' holds no sample of class(es) 'bee' that 'train' has: its scores "
                           "say nothing of them\n"), std::string::npos) << built.err;

  auto info = RunCommand(kPrep + " info " + db, dir_);
  EXPECT_NE(info.out.find("classes      class                     train        val\n"
                          "             ant                          30          4\n"
                          "             bee                           2          0\n"
                          "             cow                           3          1\n"), std::string::npos) << info.out;
  const auto manifest = nlohmann::json::parse(RunCommand(kPrep + " info " + db + " --json", dir_).out);
  EXPECT_EQ(manifest["class_counts"], nlohmann::json({{"train", {30, 2, 3}}, {"val", {4, 0, 1}}}));
  EXPECT_EQ(manifest["notes"].back(), "split 'val' holds no sample of class(es) 'bee' that 'train' has: its scores "
                                      "say nothing of them");

  // Where the val split is scored, its missing class is named beside its recalls: after the last epoch, or
  // the one that reaches --stop-at-accuracy (0.8 for answering 'ant' every time).
  auto trained = RunCommand(kTrain + " --db " + db + " --ranks 1 --epochs 3 --stop-at-accuracy 0.5", dir_);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE((trained.out + trained.err).find("after epoch 1, "), std::string::npos) << trained.out << trained.err;
  EXPECT_NE(trained.out.find("balanced accuracy"), std::string::npos) << trained.out;
  EXPECT_NE(trained.out.find(" (it holds no sample of 'bee': its scores say nothing of them)"), std::string::npos)
      << trained.out;

  // A manifest whose counts do not sum to its split is refused, naming the member.
  nlohmann::json lying = nlohmann::json::parse(testing::ReadFile(db + "/manifest.json"));
  lying["class_counts"]["val"][0] = 5;
  testing::WriteFile(db + "/manifest.json", lying.dump(2));
  ExpectOneLineError(RunCommand(kPrep + " info " + db, dir_),
                     "class_counts.val: not one count for each of the db's 3 classes summing to the split's 5 "
                     "samples");
}

}  // namespace
}  // namespace granary
