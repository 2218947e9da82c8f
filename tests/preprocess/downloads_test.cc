// Datasets as they are downloaded or saved, one pace off prep's usual path:
// Kaggle's train.csv beside a test.csv without labels, a table pandas wrote
// with its index, --val-fraction on a folder that has a test split but
// no val split, a test/ of images without labels, and a download's folder
// given for the dataset inside it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "preprocess/png.h"
#include "preprocess/source.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

std::string Notes(const Source& source) {
  std::string notes;
  for (const std::string& note : source.info.notes) notes += note + "\n";
  return notes;
}

// root/<split>/<class>/0.png ... (count-1).png, 4x4 gray, for each split and class.
void WriteSplitFolders(const std::string& root, const std::vector<std::string>& splits,
                       const std::vector<std::string>& classes, int count) {
  const std::vector<uint8_t> pixels(16, 90);
  for (const std::string& split : splits) {
    for (const std::string& c : classes) {
      std::filesystem::create_directories(root + "/" + split + "/" + c);
      for (int i = 0; i < count; ++i) {
        const std::string path = root + "/" + split + "/" + c + "/" + std::to_string(i) + ".png";
        ASSERT_TRUE(WritePng(path, pixels.data(), 4, 4, 1).ok()) << path;
      }
    }
  }
}

std::vector<std::string> SplitsOf(const Source& source) {
  std::vector<std::string> splits;
  for (const auto& split : source.splits) splits.push_back(split->name() + " " + std::to_string(split->size()));
  return splits;
}

// Kaggle's competition folder: train.csv, test.csv (the same columns but
// the label, which is what the submission predicts), a sample submission.
// The label is the column test.csv lacks; test.csv is left out and noted;
// --val-fraction holds out val from train.csv (it did nothing beside a
// test.csv), and is refused beside a val.csv.
TEST(Downloads, KagglesTestCsvWithoutLabelsNamesTheLabelAndIsLeftOut) {
  TempDir dir;
  std::string train = "PassengerId,Survived,Pclass,Fare\n", test = "PassengerId,Pclass,Fare\n";
  for (int i = 0; i < 40; ++i) {
    train += std::to_string(i) + "," + std::to_string(i % 2) + ",1," + std::to_string(i) + "\n";
  }
  for (int i = 0; i < 10; ++i) test += std::to_string(40 + i) + ",2,7.5\n";
  testing::WriteFile(dir.Sub("train.csv"), train);
  testing::WriteFile(dir.Sub("test.csv"), test);
  testing::WriteFile(dir.Sub("gender_submission.csv"), "PassengerId,Survived\n40,0\n");
  CsvOptions options;
  auto source = OpenCsvSource(dir.path(), options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.options.at("label"), "Survived");  // recorded as if given: --label Survived is the same build
  EXPECT_EQ(SplitsOf(source.value()), (std::vector<std::string>{"train 40"}));
  const std::string notes = Notes(source.value());
  EXPECT_NE(notes.find("label column 'Survived' (the column test.csv lacks"), std::string::npos) << notes;
  EXPECT_NE(notes.find(dir.Sub("test.csv") + ": " + dir.Sub("train.csv") + "'s columns without its label 'Survived' "
                       "(a test set without labels, as Kaggle ships them): left out; --val-fraction F holds out"),
            std::string::npos)
      << notes;
  options.val_fraction = 0.25;
  auto held_out = OpenCsvSource(dir.path(), options);
  ASSERT_TRUE(held_out.ok()) << held_out.status().ToString();
  ASSERT_EQ(held_out->splits.size(), 2u);
  EXPECT_EQ(held_out->splits[1]->name(), "val");
  EXPECT_EQ(held_out->splits[0]->size() + held_out->splits[1]->size(), 40u);
  testing::WriteFile(dir.Sub("val.csv"), train);
  auto twice = OpenCsvSource(dir.path(), options);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "--val-fraction: " + dir.Sub("val.csv") + " is the val split already");
  // A test.csv with the label is a test split, as before; one lacking two columns differs.
  std::filesystem::remove(dir.Sub("val.csv"));
  testing::WriteFile(dir.Sub("test.csv"), "PassengerId,Pclass\n1,2\n");
  options.val_fraction = 0;
  options.label = "Survived";
  EXPECT_NE(OpenCsvSource(dir.path(), options).status().message().find("header differs"), std::string::npos);
}

// A table pandas wrote with df.to_csv(path) (index=True, its default): a
// first column without a name holding row numbers. It was refused ("column
// 1 of 4 has no name"); it is left out, and noted. Another column without a
// name is still refused.
TEST(Downloads, PandasIndexColumnIsLeftOutAndNoted) {
  TempDir dir;
  testing::WriteFile(dir.Sub("df.csv"), ",a,b,label\n0,1.5,2,0\n1,2.5,3,1\n2,3.5,1,0\n");
  auto source = OpenCsvSource(dir.Sub("df.csv"), {});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.element_names.at("features"), (std::vector<std::string>{"a", "b"}));
  EXPECT_NE(Notes(source.value()).find("column 1 has no name: the index pandas' to_csv writes (unless index=False), "
                                       "row numbers; left out"),
            std::string::npos)
      << Notes(source.value());
  EXPECT_EQ(Notes(source.value()).find("left out by --drop"), std::string::npos);
  testing::WriteFile(dir.Sub("gap.csv"), "a,,b,label\n1,2,3,0\n");
  EXPECT_NE(OpenCsvSource(dir.Sub("gap.csv"), {}).status().message().find("column 2 of 4 has no name"),
            std::string::npos);
}

// OpenSource of `raw`, refused saying `said`, the `links` command and its
// build, then `ending`; then of the folder those links make, `linked`.
StatusOr<Source> OpenThroughTheLinksItNames(const TempDir& dir, RawOptions raw, const std::string& said,
                                            const std::string& links, const std::string& linked,
                                            const std::string& ending) {
  auto refused = OpenSource(raw);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), raw.raw + ": " + said + links + " && prep build " + linked + " DB" + ending);
  EXPECT_EQ(std::system(("cd " + dir.path() + " && " + links).c_str()), 0);
  raw.raw = dir.Sub(linked);
  return OpenSource(raw);
}

// A count to predict as the UCI bike sharing table has it (cnt: bicycles
// rented an hour): 150 values over 600 rows, under the bound that refuses
// integers nearly all distinct, but each value a class with 4 rows to learn
// from. Built as classes, with a note naming --regression.
TEST(Downloads, ACountReadAsClassesIsNotedWithRegression) {
  TempDir dir;
  std::string counts = "temp,cnt\n";
  for (int i = 0; i < 600; ++i) counts += std::to_string(i % 7) + "," + std::to_string(i % 150) + "\n";
  testing::WriteFile(dir.Sub("counts.csv"), counts);
  CsvOptions o;
  o.label = "cnt";
  auto count = OpenCsvSource(dir.Sub("counts.csv"), o);
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(count->info.notes.back(), "column 'cnt' holds 150 integer values, each a class, for 600 rows (4 a class on "
                                      "average): a count or an amount to predict? --regression reads it as a number "
                                      "(train fits it with mean squared error)");
}

// train/ and test/ of class folders, as torchvision-style datasets come:
// --val-fraction holds val out of train/ (it was ignored without a word);
// beside a val/ folder it is refused.
TEST(Downloads, ValFractionHoldsValOutOfTrainBesideATestFolder) {
  TempDir dir;
  WriteSplitFolders(dir.Sub("raw"), {"train", "test"}, {"a", "b"}, 10);
  ImageFolderOptions options;
  options.width = options.height = 4;
  options.val_fraction = 0.3;
  auto source = OpenImageFolderSource(dir.Sub("raw"), options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const std::vector<std::string> splits = SplitsOf(source.value());
  ASSERT_EQ(splits.size(), 3u);
  EXPECT_EQ(splits[1].substr(0, 4), "val ");
  EXPECT_EQ(splits[2], "test 20");
  EXPECT_EQ(source->splits[0]->size() + source->splits[1]->size(), 20u);
  std::filesystem::rename(dir.Sub("raw/test"), dir.Sub("raw/val"));
  auto twice = OpenImageFolderSource(dir.Sub("raw"), options);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "--val-fraction: " + dir.Sub("raw/val") + " is the val split already");
}

// Kaggle's image datasets name their splits Training/ and Testing/ as often
// as train/ and test/ (the brain tumour MRI set: Training/glioma/...,
// Testing/glioma/...). Those were read as two classes, "Testing" and
// "Training": a classifier of which folder an image came from, without a
// word. They are splits, as train/ and test/ are.
TEST(Downloads, TrainingAndTestingFoldersAreSplits) {
  TempDir dir;
  WriteSplitFolders(dir.Sub("mri"), {"Training", "Testing"}, {"glioma", "meningioma", "notumor"}, 3);
  ImageFolderOptions options;
  options.width = options.height = 4;
  auto source = OpenImageFolderSource(dir.Sub("mri"), options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.options.at("layout"), "splits");
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"glioma", "meningioma", "notumor"}));
  EXPECT_EQ(SplitsOf(source.value()), (std::vector<std::string>{"train 9", "test 9"}));
  // Two folders of one split: which is meant cannot be told.
  WriteSplitFolders(dir.Sub("mri"), {"test"}, {"glioma"}, 1);
  auto twice = OpenImageFolderSource(dir.Sub("mri"), options);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("both Testing/ and test/: which one is the test split?"), std::string::npos)
      << twice.status().ToString();
}

// A competition's images: train/<class>/ and val/<class>/ beside test/*.jpg,
// the images to predict, without labels. They were read as the classes
// test, train and val (reading the splits would have left test/'s images
// out): a classifier of which folder an image came from. The splits are
// read, and test/ is left out and noted.
TEST(Downloads, ATestFolderOfImagesWithoutLabelsIsLeftOutOfTheSplits) {
  TempDir dir;
  WriteSplitFolders(dir.Sub("raw"), {"train", "val"}, {"a", "b"}, 2);
  const std::vector<uint8_t> pixels(16, 90);
  std::filesystem::create_directories(dir.Sub("raw/test"));
  for (const char* name : {"1.png", "2.png"}) {
    ASSERT_TRUE(WritePng(dir.Sub("raw/test/") + name, pixels.data(), 4, 4, 1).ok());
  }
  ImageFolderOptions options;
  options.width = options.height = 4;
  auto source = OpenImageFolderSource(dir.Sub("raw"), options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.options.at("layout"), "splits");
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(SplitsOf(source.value()), (std::vector<std::string>{"train 4", "val 4"}));
  EXPECT_NE(Notes(source.value()).find("test/: neither class folders nor a table of labels (a test set without "
                                       "labels): its images are left out"),
            std::string::npos) << Notes(source.value());
  // Beside a folder that is no split, holding images, it stays the class reading (train/ a class among others).
  WriteSplitFolders(dir.Sub("raw"), {"extra"}, {"c"}, 1);
  auto beside = OpenImageFolderSource(dir.Sub("raw"), options);
  ASSERT_TRUE(beside.ok()) << beside.status().ToString();
  EXPECT_EQ(beside->info.options.at("layout"), "classes");
}

// Kaggle's Cats and Dogs extracted: kagglecatsanddogs/PetImages/{Cat,Dog}. Its folder read as classes would be
// one class, PetImages: refused, naming the folder whose folders are the classes; --layout classes builds it so.
// The same for a folder whose one folder holds a dataset's splits.
TEST(Downloads, AFolderWhoseOneFolderHoldsTheClassesSaysToBuildFromThat) {
  TempDir dir;
  WriteSplitFolders(dir.Sub("kagglecatsanddogs"), {"PetImages"}, {"Cat", "Dog"}, 2);
  RawOptions raw;
  raw.raw = dir.Sub("kagglecatsanddogs");
  raw.size = "4";
  auto refused = OpenSource(raw);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            raw.raw + ": holds one folder, PetImages/, whose folders Cat/, Dog/ hold the images: they are the classes; "
                      "build from it (prep build " + raw.raw + "/PetImages DB), or give --layout classes for one "
                      "class of them all");
  raw.layout = "classes";
  auto one = OpenSource(raw);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->info.class_names, (std::vector<std::string>{"PetImages"}));
  EXPECT_NE(Notes(one.value()).find("every sample has the one class 'PetImages'"), std::string::npos);
  raw.layout = "auto";
  raw.raw = dir.Sub("kagglecatsanddogs/PetImages");
  auto two = OpenSource(raw);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->info.class_names, (std::vector<std::string>{"Cat", "Dog"}));
  // Kaggle's chest X-rays extracted: chest_xray/chest_xray/{train,test,val}/{NORMAL,PNEUMONIA}: one class,
  // chest_xray, with a note; the folder to build from is named.
  WriteSplitFolders(dir.Sub("chest_xray/chest_xray"), {"train", "test", "val"}, {"NORMAL", "PNEUMONIA"}, 1);
  raw.raw = dir.Sub("chest_xray");
  auto splits = OpenSource(raw);
  ASSERT_FALSE(splits.ok());
  EXPECT_EQ(splits.status().message(),
            raw.raw + ": holds one folder, chest_xray/, whose folders test/, train/, val/ are a dataset's splits; "
                      "build from it (prep build " + raw.raw + "/chest_xray DB), or give --layout classes for one "
                      "class of them all");
}

// Intel's image classification download: seg_train/seg_train/<class>/,
// seg_test/seg_test/<class>/, seg_pred/seg_pred/*.jpg. Read as classes it was
// seg_pred, seg_test and seg_train, the folder each image came from, without
// a word. Refused, naming the links that read it as splits, which do; two
// folders whose names say no split (fold1/, fold2/) are built, with a note.
TEST(Downloads, SplitsUnderOtherNamesAreNamedWithTheLinksThatReadThem) {
  TempDir dir;
  WriteSplitFolders(dir.Sub("intel/seg_train"), {"seg_train"}, {"forest", "glacier"}, 2);
  WriteSplitFolders(dir.Sub("intel/seg_test"), {"seg_test"}, {"forest", "glacier"}, 1);
  std::filesystem::create_directories(dir.Sub("intel/seg_pred/seg_pred"));
  const std::vector<uint8_t> pixels(16, 90);
  ASSERT_TRUE(WritePng(dir.Sub("intel/seg_pred/seg_pred/7.png"), pixels.data(), 4, 4, 1).ok());
  RawOptions raw;
  raw.raw = dir.Sub("intel");
  raw.size = "4";
  const std::string links = "mkdir intel-splits && ln -s " + dir.Sub("intel/seg_test/seg_test") + " intel-splits/test"
                            " && ln -s " + dir.Sub("intel/seg_train/seg_train") + " intel-splits/train";
  auto splits = OpenThroughTheLinksItNames(
      dir, raw,
      "seg_test/, seg_train/ hold the same folders (forest, glacier): read as class folders, as torchvision's "
      "ImageFolder would, an image's class is the folder it lies in (seg_pred, seg_test, seg_train), not forest, "
      "glacier. If they are splits, build from a folder that names them so: ",
      links, "intel-splits", " (split folders are train, val, test); --layout classes reads them as classes");
  ASSERT_TRUE(splits.ok()) << splits.status().ToString();
  EXPECT_EQ(splits->info.class_names, (std::vector<std::string>{"forest", "glacier"}));
  EXPECT_EQ(SplitsOf(splits.value()), (std::vector<std::string>{"train 4", "test 2"}));
  raw.raw = dir.Sub("intel");
  raw.layout = "classes";
  auto classes = OpenSource(raw);
  EXPECT_TRUE(classes.ok()) << classes.status().ToString();

  WriteSplitFolders(dir.Sub("folds"), {"fold1", "fold2"}, {"forest", "glacier"}, 1);
  raw.raw = dir.Sub("folds");
  raw.layout = "auto";
  auto folds = OpenSource(raw);
  ASSERT_TRUE(folds.ok()) << folds.status().ToString();
  EXPECT_EQ(folds->info.class_names, (std::vector<std::string>{"fold1", "fold2"}));
  EXPECT_NE(Notes(folds.value()).find("fold1/, fold2/ hold the same folders (forest, glacier): read as class "
                                      "folders"), std::string::npos) << Notes(folds.value());
  EXPECT_NE(Notes(folds.value()).find("folds-splits/train && ln -s"), std::string::npos) << Notes(folds.value());
}

// The COVID-19 radiography download: COVID/{images,masks}/, Normal/{images,masks}/. Read as classes, as ImageFolder
// reads it, each class's lung masks were samples of it beside its X-rays. Refused, with the links that leave them out.
TEST(Downloads, MasksBesideEachClasssImagesAreNamedWithTheLinksThatLeaveThemOut) {
  TempDir dir;
  for (const char* c : {"COVID", "Normal"}) WriteSplitFolders(dir.Sub("xray/") + c, {""}, {"images", "masks"}, 2);
  RawOptions raw;
  raw.raw = dir.Sub("xray");
  raw.size = "4";
  const std::string links = "mkdir xray-images && ln -s " + dir.Sub("xray/COVID/images") + " xray-images/COVID && "
                            "ln -s " + dir.Sub("xray/Normal/images") + " xray-images/Normal";
  auto images = OpenThroughTheLinksItNames(
      dir, raw,
      "COVID/, Normal/ each hold masks/ beside images/: segmentation masks? Read as class folders, as torchvision's "
      "ImageFolder would, every image below a class folder is a sample of it, the masks too. To leave them out, "
      "build from a folder of each class's images/: ",
      links, "xray-images", "; --layout classes reads them all as samples");
  ASSERT_TRUE(images.ok()) << images.status().ToString();
  EXPECT_EQ(images->info.class_names, (std::vector<std::string>{"COVID", "Normal"}));
  EXPECT_EQ(SplitsOf(images.value()), (std::vector<std::string>{"train 4"}));
}

}  // namespace
}  // namespace granary
