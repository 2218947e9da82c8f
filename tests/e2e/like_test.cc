// A model evaluated on data it was not trained on, as users bring that data:
// a held-out table or folder built on its own numbers its classes and
// one-hot columns by what it holds, so label 1 or feature 2 can mean
// another thing than to the model. train refuses such a db, naming the
// place; prep build --like builds it as the model's db was built.
#include "tests/e2e/e2e.h"

namespace granary {
namespace {

// A table whose class is its colour's (blue: cat, green: dog, red: fox).
std::string ColourTable(int rows, const std::vector<std::string>& colours, int seed, bool id_last = false) {
  static const std::map<std::string, std::string> kClassOf = {{"blue", "cat"}, {"green", "dog"}, {"red", "fox"}};
  std::string text = id_last ? "x,colour,y,id\n" : "x,colour,y\n";
  for (int i = 0; i < rows; ++i) {
    const std::string& colour = colours[static_cast<size_t>(i * 7 + seed) % colours.size()];
    text += std::to_string((i * 37 + seed) % 101 / 101.0) + "," + colour + "," + kClassOf.at(colour) +
            (id_last ? "," + std::to_string(i) : "") + "\n";
  }
  return text;
}

// The held-out table lacks 'blue' (and so 'cat'): built on its own, its
// columns and labels mean other things than to the model, and train says
// so; built --like the training db, it is scored as it should be.
TEST_F(EndToEnd, AHeldOutTableIsRefusedUnlessBuiltLikeTheModelsDb) {
  testing::WriteFile(dir_.Sub("train.csv"), ColourTable(600, {"blue", "green", "red"}, 0));
  testing::WriteFile(dir_.Sub("held.csv"), ColourTable(200, {"green", "red"}, 3, /*id_last=*/true));
  const std::string tr = dir_.Sub("tr.db"), model = dir_.Sub("m.pt");
  ASSERT_EQ(RunCommand(kPrep + " build " + dir_.Sub("train.csv") + " " + tr + " --val-fraction 0.2 --no-progress",
                       dir_).exit_code, 0);
  auto trained = RunCommand(kTrain + " --db " + tr + " --ranks 1 --epochs 15 --lr 0.01 --save " + model, dir_);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;

  ASSERT_EQ(RunCommand(kPrep + " build " + dir_.Sub("held.csv") + " " + dir_.Sub("own.db") + " --drop id "
                       "--no-progress", dir_).exit_code, 0);
  const std::string eval = " --model " + model + " --eval-only --eval-split train";
  ExpectOneLineError(RunCommand(kTrain + " --db " + dir_.Sub("own.db") + eval, dir_),
                     "its classes are cat, dog, fox (its card says) and the db's dog, fox: label 0 is 'cat' to the "
                     "model and 'dog' in the db");

  const std::string like = dir_.Sub("like.db");
  auto built = RunCommand(kPrep + " build " + dir_.Sub("held.csv") + " " + like + " --like " + tr + " --no-progress",
                          dir_);
  ASSERT_EQ(built.exit_code, 0) << built.err;
  EXPECT_NE(built.err.find("column(s) none of --like " + tr + "'s features, left out: 'id'"), std::string::npos)
      << built.err;
  auto info = RunCommand(kPrep + " info " + like + " --json", dir_);
  const auto manifest = nlohmann::json::parse(info.out);
  EXPECT_EQ(manifest["element_names"]["features"],
            nlohmann::json({"x", "colour=blue", "colour=green", "colour=red"}));
  EXPECT_EQ(manifest["class_names"], nlohmann::json({"cat", "dog", "fox"}));
  auto scored = RunCommand(kTrain + " --db " + like + eval, dir_);
  ASSERT_EQ(scored.exit_code, 0) << scored.err;
  EXPECT_NE(scored.out.find("200 samples  acc 1.0000"), std::string::npos) << scored.out;

  // A flag that would make other samples than the model's is refused, before any work.
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("held.csv") + " " + dir_.Sub("x.db") + " --like " + tr +
                                " --label x --regression", dir_),
                     "--label x: --like " + tr + " was built with --label y, which a model trained on it was given");
  // A test set's table, without the label: no db, and the way to predict its rows named.
  testing::WriteFile(dir_.Sub("test.csv"), "x,colour\n0.5,red\n");
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("test.csv") + " " + dir_.Sub("t.db") + " --like " + tr,
                                dir_),
                     "no column 'y' for --label (the header's columns: 'x', 'colour'): a table without labels (a test "
                     "set's) is no db; predict its rows from Python with granary.load_table(");
  // A table of other columns' one-hot categories, built on its own: named at its first element that differs.
  testing::WriteFile(dir_.Sub("pink.csv"), "x,colour,y\n0.5,pink,cat\n0.7,green,dog\n0.1,red,fox\n");
  ASSERT_EQ(RunCommand(kPrep + " build " + dir_.Sub("pink.csv") + " " + dir_.Sub("pink.db") + " --no-progress",
                       dir_).exit_code, 0);
  ExpectOneLineError(RunCommand(kTrain + " --db " + dir_.Sub("pink.db") + eval, dir_),
                     "element 1 is 'colour=blue' to the model and 'colour=green' in the db; a db the model is to "
                     "read is built as its own was with prep build RAW DB --like TRAIN_DB");
}

// A held-out image folder that lacks one of the training folder's classes
// gets the training db's classes (and --size), in its order, --like it; a
// class folder the model has no output for is refused, naming it.
TEST_F(EndToEnd, AHeldOutFolderLackingAClassIsBuiltLikeTheModelsDb) {
  ASSERT_EQ(PrepFashion(dir_.Sub("one.db"), "--limit 1 --no-progress", dir_).exit_code, 0);
  ASSERT_EQ(RunCommand(kPrep + " cat " + dir_.Sub("one.db") + " 0 --png " + dir_.Sub("1.png"), dir_).exit_code, 0);
  for (const char* c : {"ant", "bee", "cow"}) {
    fs::create_directories(dir_.Sub(std::string("raw/") + c));
    for (int i = 0; i < 3; ++i) fs::copy_file(dir_.Sub("1.png"), dir_.Sub("raw/" + std::string(c) + "/" +
                                                                          std::to_string(i) + ".png"));
  }
  fs::create_directories(dir_.Sub("held/cow"));
  fs::copy_file(dir_.Sub("1.png"), dir_.Sub("held/cow/9.png"));
  const std::string tr = dir_.Sub("tr.db"), like = dir_.Sub("like.db");
  ASSERT_EQ(RunCommand(kPrep + " build " + dir_.Sub("raw") + " " + tr + " --size 12 --channels 1 --no-progress",
                       dir_).exit_code, 0);
  auto built = RunCommand(kPrep + " build " + dir_.Sub("held") + " " + like + " --like " + tr + " --no-progress",
                          dir_);
  ASSERT_EQ(built.exit_code, 0) << built.err;
  auto record = nlohmann::json::parse(RunCommand(kPrep + " cat " + like + " 0 --json", dir_).out);
  EXPECT_EQ(record["fields"]["label"]["values"][0], 2) << record;  // cow, as tr.db numbers it (held/ alone: 0)
  auto info = nlohmann::json::parse(RunCommand(kPrep + " info " + like + " --json", dir_).out);
  EXPECT_EQ(info["class_names"], nlohmann::json({"ant", "bee", "cow"}));
  EXPECT_EQ(info["schema"]["fields"][0]["shape"], nlohmann::json({12, 12, 1}));

  fs::create_directories(dir_.Sub("held/elk"));
  fs::copy_file(dir_.Sub("1.png"), dir_.Sub("held/elk/1.png"));
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("held") + " " + dir_.Sub("x.db") + " --like " + tr, dir_),
                     "class 'elk' is none of --like " + tr + "'s classes (ant, bee, cow), so a model trained on it "
                     "has no output for it");
}

// Held-out images labelled by a table, or by their names, as Kaggle ships
// them, built like a db of class folders: each label by its class's name.
TEST_F(EndToEnd, HeldOutImagesLabelledByATableOrTheirNamesAreBuiltLikeTheModelsDb) {
  ASSERT_EQ(PrepFashion(dir_.Sub("one.db"), "--limit 1 --no-progress", dir_).exit_code, 0);
  ASSERT_EQ(RunCommand(kPrep + " cat " + dir_.Sub("one.db") + " 0 --png " + dir_.Sub("1.png"), dir_).exit_code, 0);
  for (const char* c : {"ant", "bee", "cow"}) {
    fs::create_directories(dir_.Sub(std::string("raw/") + c));
    for (int i = 0; i < 2; ++i) fs::copy_file(dir_.Sub("1.png"), dir_.Sub("raw/" + std::string(c) + "/" +
                                                                          std::to_string(i) + ".png"));
  }
  const std::string tr = dir_.Sub("tr.db");
  ASSERT_EQ(RunCommand(kPrep + " build " + dir_.Sub("raw") + " " + tr + " --size 12 --no-progress", dir_).exit_code, 0);
  fs::create_directories(dir_.Sub("table"));
  fs::create_directories(dir_.Sub("names"));
  for (const char* image : {"cow.1.png", "ant.2.png"}) {
    fs::copy_file(dir_.Sub("1.png"), dir_.Sub(std::string("table/") + image));
    fs::copy_file(dir_.Sub("1.png"), dir_.Sub(std::string("names/") + image));
  }
  testing::WriteFile(dir_.Sub("labels.csv"), "id,label\ncow.1.png,cow\nant.2.png,ant\n");
  const auto labels_of = [&](const std::string& db) {
    std::vector<int64_t> labels;
    for (int i = 0; i < 2; ++i) {
      auto record = nlohmann::json::parse(RunCommand(kPrep + " cat " + db + " " + std::to_string(i) + " --json",
                                                     dir_).out);
      labels.push_back(record["fields"]["label"]["values"][0].get<int64_t>());
    }
    std::sort(labels.begin(), labels.end());
    return labels;
  };
  for (const std::string& how : {"--labels " + dir_.Sub("labels.csv"), std::string("--label-from-name")}) {
    const std::string raw = dir_.Sub(how == "--label-from-name" ? "names" : "table"), db = raw + ".db";
    auto built = RunCommand(kPrep + " build " + raw + " " + db + " " + how + " --like " + tr + " --no-progress", dir_);
    ASSERT_EQ(built.exit_code, 0) << how << ": " << built.err;
    EXPECT_EQ(labels_of(db), std::vector<int64_t>({0, 2})) << how;  // ant and cow as tr.db numbers them (alone: 0, 1)
    auto info = nlohmann::json::parse(RunCommand(kPrep + " info " + db + " --json", dir_).out);
    EXPECT_EQ(info["class_names"], nlohmann::json({"ant", "bee", "cow"})) << how;
    EXPECT_EQ(info["schema"]["fields"][0]["shape"], nlohmann::json({12, 12, 3})) << how;
  }
  testing::WriteFile(dir_.Sub("labels.csv"), "id,label\ncow.1.png,cow\nant.2.png,elk\n");
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("table") + " " + dir_.Sub("x.db") + " --labels " +
                                    dir_.Sub("labels.csv") + " --like " + tr, dir_),
                     "labels.csv:3: 'ant.2.png' is labelled 'elk', which is none of --like " + tr +
                     "'s 3 classes (ant, bee, cow): a model trained on them has no output for it");
  fs::copy_file(dir_.Sub("1.png"), dir_.Sub("names/elk.3.png"));
  ExpectOneLineError(RunCommand(kPrep + " build " + dir_.Sub("names") + " " + dir_.Sub("y.db") +
                                    " --label-from-name --like " + tr, dir_),
                     "elk.3.png: its name says class 'elk', which is none of --like " + tr + "'s classes (ant, bee, "
                     "cow), so a model trained on it has no output for it");
}

// A held-out folder built at prep's default size, the model's at another:
// a model whose forward fails on it is told why, and one that takes any
// size (a ResNet pools adaptively) scores it with a warning; the fix named.
TEST_F(EndToEnd, AModelTrainedAtOneSizeIsNamedOnImagesOfAnother) {
  ASSERT_EQ(PrepFashion(dir_.Sub("one.db"), "--limit 1 --no-progress", dir_).exit_code, 0);
  ASSERT_EQ(RunCommand(kPrep + " cat " + dir_.Sub("one.db") + " 0 --png " + dir_.Sub("1.png"), dir_).exit_code, 0);
  for (const char* c : {"ant", "bee"}) {
    fs::create_directories(dir_.Sub(std::string("raw/") + c));
    for (int i = 0; i < 2; ++i) fs::copy_file(dir_.Sub("1.png"), dir_.Sub("raw/" + std::string(c) + "/" +
                                                                          std::to_string(i) + ".png"));
  }
  const std::string at32 = dir_.Sub("at32.db"), held = dir_.Sub("held.db");
  ASSERT_EQ(RunCommand(kPrep + " build " + dir_.Sub("raw") + " " + at32 + " --size 32 --no-progress", dir_).exit_code,
            0);
  ASSERT_EQ(RunCommand(kPrep + " build " + dir_.Sub("raw") + " " + held + " --no-progress", dir_).exit_code, 0);
  const std::string fix = "--like TRAIN_DB (the db it was trained on), or --size 32";
  for (const char* model : {"convnet", "resnet"}) {
    const std::string saved = dir_.Sub(std::string(model) + ".pt");
    auto trained = RunCommand(kTrain + " --db " + at32 + " --model " + model + " --ranks 1 --epochs 1 --save " + saved,
                              dir_);
    ASSERT_EQ(trained.exit_code, 0) << trained.err;
    auto scored = RunCommand(kTrain + " --db " + held + " --model " + saved + " --eval-only --eval-split train", dir_);
    const std::string said = "--model " + saved + " was trained on inputs of 32 x 32 pixels of 3 channels (its card "
                             "says), and the db's field 'image' gives 64 x 64 pixels of 3 channels; a db the model is "
                             "to read is built at its size with prep build RAW DB " + fix;
    if (std::string(model) == "convnet") {
      ExpectOneLineError(scored, "dry forward: RuntimeError: mat1 and mat2 shapes cannot be multiplied");
      EXPECT_NE(scored.err.find(said), std::string::npos) << scored.err;
    } else {
      ASSERT_EQ(scored.exit_code, 0) << scored.err;
      EXPECT_NE(scored.err.find("train: warning: " + said + " (the model takes these inputs, pooling adaptively"),
                std::string::npos) << scored.err;
      auto same = RunCommand(kTrain + " --db " + at32 + " --model " + saved + " --eval-only --eval-split train", dir_);
      ASSERT_EQ(same.exit_code, 0) << same.err;
      EXPECT_EQ(same.err.find("warning"), std::string::npos) << same.err;
    }
  }
}

}  // namespace
}  // namespace granary
